"""A log segment: one .log file of batches plus its offset and time indexes (Kafka's LogSegment)
and its transaction index of aborted transactions.

Files are named after the base offset as 20 digits: `00000000000000001234.log`, `.index`,
`.timeindex`, `.txnindex` (created with its first entry). Storage treats batches as opaque
bytes apart from their 61-byte header.
"""

# Long: one class, Kafka's LogSegment. Appends, reads, rolling, timestamps and the files'
# lifecycle all work on the segment's lazily loaded indexes and cached timestamps; checking and
# recovery live in segment_recovery, file names in segment_files.
from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Sequence

from spark_log.clock import Clock
from spark_log.records.batch_header import BatchHeader
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.filesystem import DEFAULT_FS, Buffer, FileSystem
from spark_log.storage.index.offset_index import OffsetIndex
from spark_log.storage.index.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from spark_log.storage.index.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex
from spark_log.storage.log.batch_check import CheckedRanges
from spark_log.storage.log.file_records import FetchSlice, FileRecords
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.read_positions import ReadPositions, read_from
from spark_log.storage.log.segment_files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_file_name,
)
from spark_log.storage.log.segment_recovery import (
    Recovered,
    Walked,
    check_head_and_tail,
    check_index,
    check_unchecked,
    cut_log,
    damage_found,
    header_at,
    index_batches,
    indexes_problem,
    last_offset_readable,
)
from spark_log.storage.log.timestamp_search import RecordSearch, TimestampAndOffset

log = logging.getLogger(__name__)

class DamagedSegmentError(CorruptRecordError):
    """A batch of `segment` failed its check while being read: the log cannot be trusted from
    there on."""

    def __init__(self, segment: Segment, cause: CorruptRecordError) -> None:
        super().__init__(f"{segment.log.path}: {cause}")
        self.segment = segment


class Segment:
    """One segment of a partition log.

    Invariants: base offset <= the first offset of the first batch, and every offset in the
    segment is > every offset of the previous segment and < the next segment's base offset;
    file names are the base offset as 20 digits; the log holds whole batches with increasing
    offsets, each fitting an int32 relative to the base offset; index entries point at batch
    starts inside the valid part of the log. Indexes are opened lazily and sanity-checked on
    first use; a failed check rebuilds both from the log.

    Thread-safety: none; the owning PartitionLog serializes all calls.
    """

    def __init__(self, directory: str, base_offset: int, config: LogConfig, *, clock: Clock,
                 fs: FileSystem = DEFAULT_FS, active: bool = False, create: bool = False,
                 suffix: str = "") -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.clock = clock
        self.fs = fs
        self._config = config
        self._active = active
        path = os.path.join(directory, segment_file_name(base_offset, ""))
        self.log = FileRecords(path + LOG_SUFFIX + suffix, fs=fs,
                               init_file_size=config.init_file_size if create else 0)
        index_size = config.segment_index_bytes
        self._offset_index = OffsetIndex(path + INDEX_SUFFIX + suffix, base_offset, index_size,
                                         writable=active, fs=fs)
        self._time_index = TimeIndex(path + TIME_INDEX_SUFFIX + suffix, base_offset, index_size,
                                     writable=active, fs=fs)
        self.txn_index = TransactionIndex(path + TXN_INDEX_SUFFIX + suffix, fs)
        self.created_ms = clock.now_ms()
        self.roll_jitter_ms = _jitter(config)
        self._rolling_ts: int | None = None  # first batch's max timestamp, loaded lazily
        self._max_ts: TimestampOffset | None = None  # loaded lazily from the time index
        self._bytes_since_index = 0
        self.checked = CheckedRanges()  # bytes of the .log whose batches passed their check
        self._read_positions = ReadPositions()  # where recent reads ended
        if create:
            self._offset_index.load()
            self._time_index.load()

    # ---- properties ---------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def offset_index(self) -> OffsetIndex:
        if not self._offset_index.is_loaded:
            self._load_index(self._offset_index)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if not self._time_index.is_loaded:
            self._load_index(self._time_index)
        return self._time_index

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    def index_problem(self) -> str | None:
        """Why the index files cannot be used as they are (missing or torn), without opening."""
        return indexes_problem(self._offset_index, self._time_index)

    def _load_index(self, index: OffsetIndex | TimeIndex) -> None:
        try:
            check_index(index, self.log)
        except (CorruptIndexError, CorruptRecordError) as e:
            log.warning("%s; rebuilding the indexes of %s", e, self.log.path)
            self.rebuild_indexes()

    def _header_at(self, position: int) -> BatchHeader:
        return header_at(self.log, position)

    # ---- append -------------------------------------------------------------------------

    def append(self, buffers: Sequence[Buffer], headers: Sequence[BatchHeader]) -> None:
        """Write whole batches (described by `headers`, offsets final) at the end of the log
        and add index entries every index.interval.bytes."""
        if not headers:
            return
        offset_index = self.offset_index
        first, last = headers[0].base_offset, headers[-1].last_offset
        if first < self.base_offset or not offset_index.can_append_offset(last):
            raise ValueError(f"offsets {first}..{last} do not fit segment {self.base_offset}")
        max_ts = self.max_timestamp_so_far()
        if self.log.size == 0:
            self._rolling_ts = max(h.max_timestamp for h in headers)
        position = self.log.append(buffers)
        self.checked.add(position, self.log.size)  # validated before the append
        interval = self._config.index_interval_bytes
        since = self._bytes_since_index
        for h in headers:  # per batch, never per record
            if h.max_timestamp > max_ts.timestamp:
                max_ts = self._max_ts = TimestampOffset(h.max_timestamp, h.last_offset)
            if since > interval:
                offset_index.append(h.last_offset, position)
                self.time_index.maybe_append(*max_ts)
                since = 0
            size = h.size
            since += size
            position += size
        self._bytes_since_index = since

    def should_roll(self, *, messages_size: int, max_timestamp: int, max_offset: int,
                    now_ms: int) -> bool:
        """Kafka's roll rule: size, age (by the first batch's timestamp), full indexes, or an
        offset that no longer fits the 32-bit relative offset."""
        size = self.log.size
        config = self._config
        if size > config.segment_size - messages_size:
            return True
        if size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) \
                > config.max_segment_ms - self.roll_jitter_ms:
            return True
        offset_index = self.offset_index
        return (not offset_index.can_append_offset(max_offset)
                or offset_index.is_full or self.time_index.is_full)

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        rolling = self.first_batch_timestamp()
        if rolling is not None and rolling >= 0:
            return message_timestamp - rolling
        return now_ms - self.created_ms

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (what rolling and max.compaction.lag.ms go by);
        None for an empty segment."""
        if self._rolling_ts is None and self.size > 0:
            self._rolling_ts = self._header_at(0).max_timestamp
        return self._rolling_ts

    # ---- read ---------------------------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0
                         ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        for pos, header in self.log.batches(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, end_offset: int | None = None) -> FetchSlice | None:
        """Whole batches from the one containing `start_offset`, at most `max_bytes` (but the
        first batch whole when `min_one_batch`), stopping before a batch starting at or after
        `max_offset`. None when `start_offset` is past this segment's data.

        `end_offset`, when the caller knows it (the offset after this segment's last batch),
        lets a read that takes the rest of the segment skip the batch walk; otherwise the walk
        starts from the last index entry inside the byte limit, so it covers at most about
        index.interval.bytes of batch headers however large the read."""
        if max_bytes < 0:
            raise ValueError(f"invalid max bytes {max_bytes} for a read of {self.log.path}")
        known = self._read_positions.get(start_offset)
        if known is not None:
            small = read_from(self.log, known, start_offset, max_bytes, max_offset,
                              min_one_batch)
            if small is not None:
                start, end, next_offset, data = small
                return self._slice(start, end, next_offset, end_offset, data)
        try:
            found = self.translate_offset(start_offset)
            if found is None:
                return None
            start, first = found
            limit = max(max_bytes, first.size) if min_one_batch else max_bytes
            stop = start + limit
            size = self.log.size
            if stop >= size and end_offset is not None and (max_offset is None or
                                                            max_offset >= end_offset):
                # The rest of the segment, up to `end_offset` (as Kafka bounds the aborted
                # transactions of a read reaching a segment's end): remembered, so a consumer
                # keeping up reads the next append from here.
                end, next_offset = size, end_offset
            else:
                end, next_offset = self._read_end(start, stop, max_offset)
        except DamagedSegmentError:
            raise
        except CorruptRecordError as e:
            raise DamagedSegmentError(self, e) from e
        return self._slice(start, end, next_offset, end_offset)

    def _slice(self, start: int, end: int, next_offset: int | None,
               end_offset: int | None, data: memoryview | None = None) -> FetchSlice:
        """The checked slice [start, end) (`data`: its bytes, if read); where it ends is
        remembered for the next read."""
        self.check(start, end, end_offset)
        if next_offset is not None and end > start:
            self._read_positions.remember(next_offset, end)
        return self.log.slice(start, end - start, next_offset, data)

    def _read_end(self, start: int, stop: int, max_offset: int | None
                  ) -> tuple[int, int | None]:
        """Where a read from `start` ends, and the offset after its last batch when the walk
        saw it."""
        end = self._walk_from(start, stop, max_offset)
        next_offset = None
        for pos, header in self.log.batches(end):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            if pos + header.size > stop:
                break
            end = pos + header.size
            next_offset = header.next_offset
        return end, next_offset

    def check(self, start: int, end: int, limit_offset: int | None = None) -> None:
        """Check the batches in bytes [start, end) that no one has checked since the segment
        was opened (see `batch_check`); raises DamagedSegmentError at the first bad one."""
        try:
            check_unchecked(self.log, self.checked, start, end, self.base_offset, limit_offset)
        except CorruptRecordError as e:
            raise DamagedSegmentError(self, e) from e

    def check_tail(self) -> int | str:
        """Start-up's check of the active segment after a clean shutdown (its tail is read for
        the log end offset anyway): the first batch, and every batch from the last offset
        index entry to the end. The offset after the last batch, or the problem found."""
        if self.log.size == 0:
            return self.base_offset
        index = self._offset_index
        try:  # an empty index file has no entry to load or check: the walk starts at byte 0
            tail = self.offset_index.last_entry().position \
                if index.is_loaded or index.size_on_disk() != 0 else 0
        except CorruptIndexError as e:
            return f"{self.log.path}: {e}"
        return check_head_and_tail(self.log, tail, self.base_offset, self.checked)

    def _walk_from(self, start: int, stop: int, max_offset: int | None) -> int:
        """A batch position in [start, stop] from which a forward walk finds the read's end:
        every batch before it lies inside the byte limit and below `max_offset`."""
        entry = self.offset_index.floor_by_position(stop)
        if entry is None or entry.position <= start:
            return start
        if max_offset is not None and entry.offset >= max_offset:
            bounded = self.offset_index.lookup(max_offset - 1)
            if bounded.position <= start or bounded.offset >= max_offset:
                return start
            entry = bounded
        return entry.position

    def last_offset_readable(self) -> int:
        """The last offset of the batches a header walk from the start can read (the base
        offset - 1 if none): for a segment about to be dropped, whose indexes are not trusted."""
        return last_offset_readable(self.log, self.base_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        last = None
        for _, header in self.log.batches(self.offset_index.last_entry().position):
            last = header
        return last.next_offset if last is not None else self.base_offset

    # ---- timestamps ---------------------------------------------------------------------

    def max_timestamp_so_far(self) -> TimestampOffset:
        """Largest batch max timestamp and the last offset of its batch (time index backed)."""
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry()
        return self._max_ts

    def largest_timestamp(self) -> int:
        """What retention.ms compares: the max timestamp, or the file's mtime if none."""
        ts = self.max_timestamp_so_far().timestamp
        return ts if ts >= 0 else self.log.last_modified_ms

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int,
                                 search: RecordSearch) -> TimestampAndOffset | None:
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        try:
            for pos, header in self.log.batches(position):
                if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                    self.check(pos, pos + header.size)
                    found = search.first_at_or_after(self.log.read(pos, header.size), header,
                                                     timestamp, starting_offset)
                    if found is not None:
                        return TimestampAndOffset(found[1], found[0], _epoch(header))
        except DamagedSegmentError:
            raise
        except CorruptRecordError as e:
            raise DamagedSegmentError(self, e) from e
        return None

    def offset_of_max_timestamp(self, search: RecordSearch) -> TimestampAndOffset | None:
        target = self.max_timestamp_so_far()
        if target.timestamp == NO_TIMESTAMP:
            return None
        try:
            for pos, header in self.log.batches(
                    self.offset_index.lookup(target.offset).position):
                if header.max_timestamp == target.timestamp:
                    self.check(pos, pos + header.size)
                    offset = search.offset_of_max_timestamp(self.log.read(pos, header.size),
                                                            header)
                    return TimestampAndOffset(header.max_timestamp, offset, _epoch(header))
        except DamagedSegmentError:
            raise
        except CorruptRecordError as e:
            raise DamagedSegmentError(self, e) from e
        return None

    # ---- recovery and truncation --------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None,
                limit_offset: int | None = None) -> Recovered:
        """Check every batch (size, magic, CRC, offsets increasing, inside the segment and below
        `limit_offset`, the next segment's base) and rebuild the indexes from the valid ones.
        Returns the offset after the valid batches and where the first invalid byte lies (None
        if the whole file is valid); the caller cuts it there (`cut`), keeping the bytes or
        not."""
        self.txn_index.reset()  # rebuilt with the producer state
        walked = self._rebuild(verify=True, on_batch=on_batch, limit_offset=limit_offset)
        self.checked.clear()
        self.checked.add(0, walked.valid)
        return Recovered(walked.next_offset, damage_found(self.log, walked))

    def cut(self, position: int, keep_path: str | None) -> int:
        """Truncate the .log to `position` after copying the bytes cut to `keep_path` (if
        given, fsynced); returns the number of bytes cut."""
        self.checked.truncate(position)
        self._read_positions.clear()
        return cut_log(self.log, self.fs, position, keep_path)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes by walking the batch headers (no truncation)."""
        walked = self._rebuild(verify=False)
        if walked.problem is not None:
            log.warning("%s has invalid data at byte %d (%s); reads past it will fail",
                        self.log.path, walked.valid, walked.problem)

    def _rebuild(self, *, verify: bool, on_batch: Callable[[BatchHeader], None] | None = None,
                 limit_offset: int | None = None) -> Walked:
        """Rebuild both indexes from the batches (see `segment_recovery.index_batches`)."""
        walked = index_batches(self.log, self._offset_index, self._time_index, self.base_offset,
                               self._config.index_interval_bytes, verify=verify,
                               on_batch=on_batch, limit_offset=limit_offset)
        self._bytes_since_index = 0
        self._max_ts = walked.max_timestamp
        self._rolling_ts = None
        for index in (self._offset_index, self._time_index):
            index.set_writable(self._active)
        return walked

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that ends at or after `offset` (the whole batch holding it);
        returns the bytes removed. The segment becomes writable (it is the new active one)."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.set_active(True)
        self._read_positions.clear()
        removed = self.log.truncate_to(found[0]) if found is not None else 0
        self.checked.truncate(self.log.size)
        if self.size == 0:
            self.created_ms = self.clock.now_ms()
            self._rolling_ts = None
        self._bytes_since_index = 0
        last = self.time_index.last_entry()
        for _, h in self.log.batches(self.offset_index.lookup(last.offset).position):
            if h.max_timestamp > last.timestamp:
                last = TimestampOffset(h.max_timestamp, h.last_offset)
        self._max_ts = last
        return removed

    # ---- lifecycle ----------------------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self._active = active
        for index in (self._offset_index, self._time_index):
            index.set_writable(active)

    def on_become_inactive(self) -> None:
        """Roll: record the largest timestamp in the time index and trim every file."""
        self.time_index.maybe_append(*self.max_timestamp_so_far(), skip_full_check=True)
        self.set_active(False)
        self.log.trim()

    def flush(self) -> None:
        self.log.flush()
        self._offset_index.flush()
        self._time_index.flush()
        self.txn_index.flush()

    def close(self, *, sync: bool = False) -> None:
        """Record the largest timestamp, trim every file, fsync them if `sync`, close."""
        if self._max_ts is not None:
            self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        self._offset_index.close(sync=sync)
        self._time_index.close(sync=sync)
        self.txn_index.close(sync=sync)
        self.log.trim()
        if sync:
            self.log.flush()
        self.log.close()

    def close_indexes(self) -> None:
        """Close both indexes (trimmed); the next lookup or append loads them again. Start-up
        leaves every index closed, so an idle partition holds no map and one descriptor."""
        self._offset_index.close()
        self._time_index.close()

    def release(self) -> None:
        """Let go of the files without writing anything (after a storage failure)."""
        self._offset_index.release()
        self._time_index.release()
        self.txn_index.release()
        self.log.close()

    def index_file_sizes(self) -> tuple[int, int]:
        """Bytes of the offset and time index files, without opening them."""
        return self._offset_index.file_size, self._time_index.file_size

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename every file from `<name><old>` to `<name><new>` (the .log first), keeping them
        open; the caller makes the renames durable with a directory fsync."""
        for f in (self.log, self._offset_index, self._time_index, self.txn_index):
            if not f.path.endswith(old):
                raise ValueError(f"{f.path} does not end with {old!r}")
            f.rename(f.path[: len(f.path) - len(old)] + new)

    def set_last_modified(self, ms: int) -> None:
        """Set the .log file's mtime (what retention.ms falls back on without timestamps)."""
        os.utime(self.log.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def files(self) -> list[str]:
        txn = [self.txn_index.path] if os.path.exists(self.txn_index.path) else []
        return [self.log.path, self._offset_index.path, self._time_index.path, *txn]

    def rename_to_deleted(self) -> None:
        self._offset_index.release()
        self._time_index.release()
        self.txn_index.release()
        for f in (self.log, self._offset_index, self._time_index, self.txn_index):
            if os.path.exists(f.path):
                f.rename(f.path + DELETED_SUFFIX)
            else:  # never touch the live name again: a new segment may take it
                f.path += DELETED_SUFFIX

    def keep_log_as(self, path: str) -> None:
        """Leave the log: its .log is renamed to `path` (kept for whoever wants its data), its
        indexes deleted. The caller fsyncs the directory."""
        self.log.rename(path)
        self.log.close()
        self._offset_index.delete_file()
        self._time_index.delete_file()
        self.txn_index.delete_file()

    def delete_files(self) -> None:
        self.log.delete()
        self._offset_index.delete_file()
        self._time_index.delete_file()
        self.txn_index.delete_file()

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"


def _epoch(header: BatchHeader) -> int | None:
    return header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None


def _jitter(config: LogConfig) -> int:
    if config.segment_jitter_ms == 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))
