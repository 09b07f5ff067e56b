"""The segments of one partition directory and the offsets that follow from them (Kafka's
LocalLog): roll, write, read across segments, flush to a recovery point, truncate, remove.

`PartitionLog` adds on top what is about the partition rather than its files: validation,
leader epochs, the log start offset, the high watermark, retention and offset lookups.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from spark_log.clock import Clock
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.file_records import EMPTY_SLICE, FetchSlice
from spark_log.storage.log.log_config import LONG_MAX, LogConfig
from spark_log.storage.log.log_segments import LogSegments
from spark_log.storage.log.log_validator import ValidatedAppend
from spark_log.storage.log.segment import Segment
from spark_log.storage.log.segment_deleter import SegmentDeleter
from spark_log.storage.log.segment_files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_file_name,
)

log = logging.getLogger(__name__)


class LocalLog:
    """Invariants: segments are contiguous and the last is the only one written; the log end
    offset is the next offset after the last batch; everything below the recovery point is
    fsynced and the recovery point is <= the log end offset.

    Thread-safety: none; its PartitionLog serializes calls and turns OSError into storage
    failures.
    """

    def __init__(self, directory: str, name: str, config: LogConfig, segments: list[Segment], *,
                 next_offset: int | None, recovery_point: int, clock: Clock,
                 fs: FileSystem, before_flush: Callable[[int], None] = lambda offset: None
                 ) -> None:
        self.dir, self.name, self.config = directory, name, config
        self.clock, self.fs = clock, fs
        self.segments = LogSegments(segments)
        self._leo = next_offset
        self.recovery_point = recovery_point if next_offset is None else \
            min(recovery_point, next_offset)
        self.deleter = SegmentDeleter(directory, fs, clock)
        # Called with the offset the recovery point is about to reach (the leader epoch
        # checkpoint must hold the epochs of the batches below it first).
        self.before_flush = before_flush
        self._roll_flush_pending = False
        self._last_flush_ms = clock.monotonic_ms()

    @property
    def log_end_offset(self) -> int:
        if self._leo is None:  # found on first use: reads the active segment's index and tail
            self._leo = self.segments.active.read_next_offset()
            self.recovery_point = min(self.recovery_point, self._leo)
        return self._leo

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.update_config(config)

    # ---- write --------------------------------------------------------------------------

    def append(self, valid: ValidatedAppend, now_ms: int) -> None:
        """Write a validated append to the active segment, rolling first when Kafka would."""
        segment = self.segments.active
        if segment.should_roll(messages_size=valid.size, max_timestamp=valid.max_timestamp,
                               max_offset=valid.last_offset, now_ms=now_ms):
            segment = self.roll(valid.first_offset)
        segment.append(valid.buffers, valid.headers)
        self._leo = valid.last_offset + 1
        if self._leo - self.recovery_point >= self.config.flush_messages:
            self.flush_to(self._leo)

    def roll(self, expected_next_offset: int) -> Segment:
        """A new active segment at max(expected offset, log end offset)."""
        new_offset = max(expected_next_offset, self.log_end_offset)
        active = self.segments.active
        if active.base_offset == new_offset and active.size == 0:
            return active  # already an empty segment there
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            stale = os.path.join(self.dir, segment_file_name(new_offset, suffix))
            if os.path.exists(stale):
                log.warning("Deleting stale file %s before rolling %s", stale, self.name)
                self.fs.remove(stale)
        active.on_become_inactive()
        return self._add_segment(new_offset, "rolled")

    def _add_segment(self, base_offset: int, why: str) -> Segment:
        segment = Segment(self.dir, base_offset, self.config, clock=self.clock, fs=self.fs,
                          active=True, create=True)
        self.segments.add(segment)
        self.fs.fsync_dir(self.dir)
        self._roll_flush_pending = True  # older segments get fsynced by flush_due
        log.info("%s: %s new segment at offset %d", self.name, why, base_offset)
        return segment

    # ---- read ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
             ) -> FetchSlice:
        """Batches from the segment holding `offset`, or the next one with data."""
        segments = self.segments
        active = segments.active  # what a consumer keeping up reads: no look-ups
        segment = active if offset >= active.base_offset else segments.floor(offset)
        while segment is not None:
            following = None if segment is active else segments.higher(segment.base_offset)
            end = following.base_offset if following is not None else self.log_end_offset
            found = segment.read(offset, max_bytes, max_offset=max_offset,
                                 min_one_batch=min_one_batch, end_offset=end)
            if found is not None:
                return found
            segment = following
        return EMPTY_SLICE

    # ---- durability ---------------------------------------------------------------------

    @property
    def is_end_known(self) -> bool:
        """False until the end offset is first needed; until then nothing was written."""
        return self._leo is not None

    def flush_to(self, offset: int | None = None) -> None:
        """fsync segments up to `offset` (default: the end); the recovery point moves there."""
        if self._leo is None:  # nothing appended since a clean open: nothing to flush
            return
        offset = self._leo if offset is None else min(offset, self._leo)
        if offset > self.recovery_point:
            self.before_flush(offset)
            for segment in self.segments.overlapping(self.recovery_point, offset):
                segment.flush()
            self.recovery_point = offset
        self._last_flush_ms = self.clock.monotonic_ms()

    def flush_due(self, now_mono_ms: int) -> None:
        if self._roll_flush_pending:
            self._roll_flush_pending = False
            self.flush_to(self.segments.active.base_offset)
        flush_ms = self.config.flush_ms
        if flush_ms < LONG_MAX and now_mono_ms - self._last_flush_ms >= flush_ms:
            self.flush_to()
        self.deleter.delete_due(now_mono_ms)

    # ---- removal ------------------------------------------------------------------------

    def remove_segments(self, segments: list[Segment], reason: str) -> None:
        """Take segments out of the log now; their files go after file.delete.delay.ms."""
        for segment in segments:
            log.info("%s: deleting segment %d (%s)", self.name, segment.base_offset, reason)
            self.segments.remove(segment)
        self.deleter.delete(segments, self.config.file_delete_delay_ms)

    def replace_segments(self, new: Segment, old: list[Segment]) -> None:
        """Swap `new` (written, fsynced, files named `*.cleaned`) in for `old`, Kafka's
        crash-safe way: rename the new files to `*.swap`, take the old segments out (renamed to
        .deleted), then rename the new files to their final names, fsyncing the directory after
        each step. A crash at any point leaves files the loader rolls back (while a `.cleaned`
        file remains) or completes (once only `.swap` files remain)."""
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self.fs.fsync_dir(self.dir)
        for segment in old:
            self.segments.remove(segment)
        new.update_config(self.config)
        self.segments.add(new)
        self.deleter.delete(old, self.config.file_delete_delay_ms)
        new.change_file_suffixes(SWAP_SUFFIX, "")
        self.fs.fsync_dir(self.dir)

    def truncate_to(self, offset: int) -> int:
        """Drop batches ending at or after `offset` (`offset` >= the first base offset);
        returns the new log end offset."""
        self.remove_segments([s for s in self.segments if s.base_offset > offset],
                             "truncation")
        active = self.segments.active
        active.truncate_to(offset)
        self._leo = active.read_next_offset()
        self.recovery_point = min(self.recovery_point, self._leo)
        return self._leo

    def truncate_fully(self, offset: int) -> None:
        """Remove every segment and start an empty one at `offset`."""
        self.remove_segments(self.segments.to_list(), "truncation")  # renamed away first
        self._add_segment(offset, "started")
        self._leo = self.recovery_point = offset

    def close(self) -> None:
        """Trim and fsync what is not yet durable, close everything; the recovery point is
        then the log end offset."""
        end = self._leo if self._leo is not None else self.recovery_point
        unflushed = {s.base_offset for s in self.segments.overlapping(self.recovery_point, end)
                     } if self._leo is not None else set()
        self.deleter.delete_due(LONG_MAX)
        if end > self.recovery_point:
            self.before_flush(end)
        for segment in self.segments:
            segment.close(sync=segment.base_offset in unflushed)
        self.recovery_point = end  # no directory fsync: trimming creates or renames nothing

    def release(self) -> None:
        for segment in self.segments:
            segment.release()
        self.deleter.release()

