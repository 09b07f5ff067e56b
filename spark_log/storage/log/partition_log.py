"""The log of one topic partition (Kafka's UnifiedLog), in `<data dir>/<topic>-<partition>/`:
append, read, offset lookups, log start offset, high watermark, retention, truncation, and
the producer state on top (idempotence, transactions, last stable offset — `producer_state`).

Durability: data is durable up to the recovery point, which advances when segments are
fsynced (flush.messages, flush.ms, roll, checkpoint, close). After a crash the loader recovers
everything from the segment holding the recovery point on. Any I/O error takes the whole data
directory offline (`LogDirFailure`): that call and every later one raise KafkaStorageError.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TypeVar

from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from spark_log.storage.errors import OffsetOutOfRangeError
from spark_log.storage.filesystem import DEFAULT_FS, Buffer, FileSystem
from spark_log.storage.index.transaction_index import AbortedTxn
from spark_log.storage.log.file_records import EMPTY_SLICE, FetchSlice
from spark_log.storage.log.leader_epoch import LeaderEpochCache
from spark_log.storage.log.local_log import LocalLog
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_dir_failure import LogDirFailure
from spark_log.storage.log.log_loader import load_segments
from spark_log.storage.log.log_validator import RecordValidator, validate_append
from spark_log.storage.log.offset_lookup import OffsetLookup
from spark_log.storage.log.partition_dir import delete_dir_name, partition_dir_name
from spark_log.storage.log.partition_producers import PartitionProducers
from spark_log.storage.log.retention import (
    Predicate,
    below_log_start,
    deletable_segments,
    over_retention_bytes,
    past_retention_ms,
)
from spark_log.storage.log.segment import DamagedSegmentError, Segment
from spark_log.storage.log.timestamp_search import HEADER_ONLY, RecordSearch, TimestampAndOffset
from spark_log.storage.producer_state.producer_state import ProducerStateManager
from spark_log.storage.producer_state.producer_state_entry import BatchMetadata, ProducerStateEntry

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionLog:
    """A partition's data and offsets.

    Invariants: log start offset <= high watermark <= log end offset; everything below the
    recovery point is fsynced; the leader epoch cache covers [log start offset, end); once
    loaded (lazily, or at open after a crash), the producer state reflects every batch below
    the log end offset, and last stable offset <= high watermark.

    Thread-safety: none. The broker calls it from its one asyncio thread; a FetchSlice returned
    by `read` may be consumed later, even after the segment it points into is deleted.
    """

    def __init__(self, data_dir: str, topic: str, partition: int, config: LogConfig, *,
                 clock: Clock = SYSTEM_CLOCK, fs: FileSystem = DEFAULT_FS,
                 failure: LogDirFailure | None = None, recovery_point: int = 0,
                 log_start_offset: int = 0, high_watermark: int = 0,
                 had_clean_shutdown: bool = False, record_search: RecordSearch = HEADER_ONLY,
                 record_validator: RecordValidator | None = None) -> None:
        self.topic, self.partition = topic, partition
        self.name = partition_dir_name(topic, partition)
        self.dir = os.path.join(data_dir, self.name)
        self.clock, self.fs = clock, fs
        self.failure = failure or LogDirFailure(data_dir)
        self.record_validator = record_validator
        with self.failure.guard("opening %s", self.name):
            if not os.path.isdir(self.dir):
                os.makedirs(self.dir)
                fs.fsync_dir(data_dir)
            self.leader_epoch_cache = LeaderEpochCache(
                os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), fs)
            loaded = load_segments(
                self.dir, config, clock=clock, fs=fs, recovery_point=recovery_point,
                log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown,
                on_batch=self.leader_epoch_cache.recover_batch)
            self._local = LocalLog(self.dir, self.name, config, loaded.segments,
                                   next_offset=loaded.next_offset,
                                   recovery_point=recovery_point, clock=clock, fs=fs,
                                   before_flush=self.leader_epoch_cache.sync_below)
            self._log_start_offset = max(log_start_offset, loaded.segments[0].base_offset)
            self._hw = max(high_watermark, self._log_start_offset)
            self.offsets = OffsetLookup(self, record_search)
            self._producers = PartitionProducers(self.dir, self.name, self._local, clock,
                                                 loaded.snapshots)
            if loaded.recovered:  # now, before the recovery point can pass the txn indexes
                self._producers.load(loaded.recovered_from)
            if self.leader_epoch_cache.damaged:
                self.leader_epoch_cache.rebuild_from(self._local.segments, self._log_start_offset,
                                                     self.name)
            elif loaded.recovered:
                self.leader_epoch_cache.truncate_from_end(self._local.log_end_offset, sync=False)
                self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            if self._log_start_offset > loaded.segments[0].base_offset and \
                    self._local.log_end_offset < self._log_start_offset:
                log.warning("%s: log end offset %d is below the log start offset %d; starting "
                            "an empty log there", self.name, self._local.log_end_offset,
                            self._log_start_offset)
                self._truncate_fully(self._log_start_offset)

    # ---- state --------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        self._local.update_config(config)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written (read lazily from the active segment after a clean
        open, so opening many logs reads no index)."""
        local = self._local
        if local.is_end_known:  # the hot path: known since the first append or read
            return local.log_end_offset
        with self.failure.guard("reading the end offset of %s", self.name):
            return local.log_end_offset

    @property
    def high_watermark(self) -> int:
        self._hw = max(self._log_start_offset, min(self._hw, self.log_end_offset))
        return self._hw

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, bounded to [log start offset, log end offset]; returns it."""
        self._hw = max(self._log_start_offset, min(offset, self.log_end_offset))
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    def checkpoint_offsets(self) -> tuple[int, int, int]:
        """(recovery point, log start offset, high watermark) for the checkpoint files,
        without reading the end offset of a log untouched since a clean open."""
        hw = self.high_watermark if self._local.is_end_known else self._hw
        return self._local.recovery_point, self._log_start_offset, hw

    @property
    def segments(self) -> list[Segment]:
        return self._local.segments.to_list()

    @property
    def size_bytes(self) -> int:
        return self._local.segments.size_bytes()

    @property
    def failed(self) -> bool:
        return self.failure.failed

    # ---- producer state (see partition_producers) ---------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        """The producers of this partition, loaded on first use."""
        with self.failure.guard("loading the producer state of %s", self.name):
            return self._producers.manager

    @property
    def last_stable_offset(self) -> int:
        """read_committed consumers read below this: the first offset of the earliest open
        transaction, or the high watermark if that is lower or none is open."""
        return self.fetch_offsets()[1]

    def fetch_offsets(self) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset): what a consumer's fetch
        answers for each partition, in one call."""
        hw = self.high_watermark
        first = self.failure.run("loading the producer state of %s", self.name,
                                 self._producers.first_unstable_offset)
        return hw, (first if first is not None and first < hw else hw), self._log_start_offset

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound)."""
        return self.failure.run("reading the transaction index of %s", self.name,
                                self._producers.aborted_transactions, fetch_offset, upper_bound)

    def active_producers(self) -> list[ProducerStateEntry]:
        with self.failure.guard("loading the producer state of %s", self.name):
            return self._producers.active()

    def remove_expired_producers(self, max_idle_ms: int, now_ms: int | None = None) -> int:
        """producer.id.expiration.ms: forget idle producers; returns how many."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        return self._producers.remove_expired(max_idle_ms, now)

    # ---- append and read ----------------------------------------------------------------

    def append(self, records: Buffer, *, leader_epoch: int,
               origin: AppendOrigin = AppendOrigin.CLIENT, now_ms: int | None = None
               ) -> AppendInfo:
        """Validate `records` (v2 batches), assign offsets and `leader_epoch` (unless
        REPLICATION) and write them with one write to the active segment, rolling first if
        needed. Nothing is written when any batch is invalid; `records` is never modified."""
        self.failure.check()
        local = self._local
        try:  # not `failure.guard`: this is the hot path
            now = self.clock.now_ms() if now_ms is None else now_ms
            valid = validate_append(
                records, config=local.config, origin=origin,
                next_offset=local.log_end_offset, leader_epoch=leader_epoch, now_ms=now,
                topic_partition=self.name, record_validator=self.record_validator)
            pending = self._producers.check(records, valid, origin)  # header work only
            if isinstance(pending, BatchMetadata):  # a retry of a batch already written
                return self._producers.duplicate_info(
                    pending, local.config.message_timestamp_type == "LogAppendTime",
                    self._log_start_offset)
            epochs = self.leader_epoch_cache
            for h in valid.headers:
                if h.partition_leader_epoch >= 0 and \
                        h.partition_leader_epoch != epochs.latest_epoch():
                    epochs.assign(h.partition_leader_epoch, h.base_offset)
            active = local.segments.active
            local.append(valid, now)
            if local.segments.active is not active:
                self._producers.snapshot(valid.first_offset)
            if pending is not None:
                self._producers.apply(pending)
        except OSError as e:
            raise self.failure.fail(f"appending to {self.name}", e) from e
        return AppendInfo(  # by position: keywords cost a hot path more
            valid.first_offset, valid.last_offset, valid.max_timestamp,
            valid.offset_of_max_timestamp, valid.log_append_time, self._log_start_offset,
            len(valid.headers), valid.record_count, valid.size)

    def roll(self) -> Segment:
        """Start a new active segment at the log end offset."""
        with self.failure.guard("rolling %s", self.name):
            end = self._local.log_end_offset
            segment = self._local.roll(end)
            self._producers.snapshot(end)
            return segment

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchSlice:
        """Whole batches from the one containing `offset`, at most `max_bytes` of them (but the
        first whole even if larger when `min_one_batch`), none starting at or after
        `max_offset` (the high watermark or last stable offset). Raises OffsetOutOfRangeError
        outside [log start offset, log end offset]; empty at the end."""
        self.failure.check()
        local = self._local
        try:  # not `failure.guard`, nor `_checked` unless a segment was damaged: the hot path
            start, end = self._log_start_offset, local.log_end_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {offset} for partition {self.name}, but we "
                    f"only have log segments in the range {start} to {end}.")
            if offset == end or (max_offset is not None and offset >= max_offset):
                return EMPTY_SLICE
            try:
                return local.read(offset, max_bytes, max_offset, min_one_batch)
            except DamagedSegmentError as e:
                return self._checked(
                    lambda: local.read(offset, max_bytes, max_offset, min_one_batch), e)
        except OSError as e:
            raise self.failure.fail(f"reading {self.name}", e) from e

    def _checked(self, read: Callable[[], T], damage: DamagedSegmentError | None = None) -> T:
        """Run a read that checks the batches it reaches (that already found `damage`, if
        given). A batch that fails may only be an index entry pointing into a batch: the
        segment's indexes are rebuilt and the read runs once more. If it fails again the log
        is damaged: the recovery point drops to that segment (so the next start recovers it)
        and the data directory goes offline."""
        if damage is None:
            try:
                return read()
            except DamagedSegmentError as e:
                damage = e
        log.warning("%s; rebuilding the indexes of that segment and reading again", damage)
        damage.segment.rebuild_indexes()
        try:
            return read()
        except DamagedSegmentError as e:
            self._local.recovery_point = min(self._local.recovery_point, e.segment.base_offset)
            raise self.failure.fail(f"reading {self.name}", e) from e

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record with timestamp >= `timestamp` at or after the log start offset."""
        with self.failure.guard("searching %s by timestamp", self.name):
            return self._checked(lambda: self.offsets.for_timestamp(timestamp))

    def list_offset(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest (the log end offset; the broker caps it at the
        high watermark or LSO), -3 max timestamp, -4 earliest local, -5 latest tiered, else the
        first record at or after the timestamp (None if there is none)."""
        with self.failure.guard("listing offsets of %s", self.name):
            return self._checked(lambda: self.offsets.list_offset(timestamp))

    # ---- removing data ------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark),
        then delete segments wholly below it; returns the new log start offset."""
        with self.failure.guard("deleting records of %s", self.name):
            hw = self.high_watermark
            target = hw if offset == -1 else offset
            if target < 0 or target > hw:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {target} of partition "
                    f"{self.name} since it is outside the range 0 to the high watermark {hw}")
            self._increment_log_start_offset(target)
            self._delete_where(below_log_start(self._log_start_offset), "log start offset")
            return self._log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (see `retention`); returns the number of segments deleted."""
        with self.failure.guard("applying retention to %s", self.name):
            now = self.clock.now_ms() if now_ms is None else now_ms
            config = self.config
            deleted = self._delete_where(below_log_start(self._log_start_offset),
                                         "log start offset")
            if config.delete:
                deleted += self._delete_where(
                    over_retention_bytes(self.size_bytes, config.retention_bytes),
                    "retention.bytes")
                deleted += self._delete_where(past_retention_ms(now, config.retention_ms),
                                              "retention.ms")
            return deleted

    def _delete_where(self, predicate: Predicate | None, reason: str) -> int:
        if predicate is None:
            return 0
        local = self._local
        doomed = deletable_segments(local.segments.to_list(), predicate,
                                    high_watermark=lambda: self.high_watermark,
                                    log_end_offset=lambda: local.log_end_offset)
        # A log always keeps a segment: roll first if all would go (an empty active one stays).
        if doomed and len(doomed) == len(local.segments) and \
                local.roll(local.log_end_offset) is doomed[-1]:
            doomed.pop()
        if doomed:
            following = local.segments.higher(doomed[-1].base_offset)
            assert following is not None
            self._increment_log_start_offset(following.base_offset)
            local.remove_segments(doomed, reason)
            self._producers.segments_deleted(following.base_offset)
        return len(doomed)

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            log.info("%s: log start offset is now %d", self.name, offset)

    def replace_segments(self, new: Segment, old: list[Segment]) -> bool:
        """Log compaction: swap the cleaned segment `new` (files `*.cleaned`, same base
        offset as `old[0]`) in for the consecutive segments `old`, crash-safely (see
        `LocalLog.replace_segments`). Returns False, changing nothing, when any of `old` is no
        longer in the log (retention, truncation or deletion came first) or is the active one."""
        with self.failure.guard("swapping a cleaned segment into %s", self.name):
            segments = self._local.segments
            if not old or new.base_offset != old[0].base_offset or segments.active in old or \
                    any(segments.floor(s.base_offset) is not s for s in old):
                return False
            self._local.replace_segments(new, old)
            return True

    def truncate_to(self, offset: int) -> bool:
        """Replication: drop every batch ending at or after `offset`; True if anything went."""
        with self.failure.guard("truncating %s", self.name):
            if offset < 0:
                raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
            if offset >= self._local.log_end_offset:
                return False
            if self._local.segments.first.base_offset > offset:
                self._truncate_fully(offset)
                return True
            end = self._local.truncate_to(offset)
            self.leader_epoch_cache.truncate_from_end(end)
            self._log_start_offset = min(self._log_start_offset, end)
            self._hw = min(self._hw, end)
            self._producers.load(end)  # snapshots past the end go; the rest is replayed
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset` (a follower far behind)."""
        with self.failure.guard("truncating %s", self.name):
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._local.truncate_fully(offset)
        self.leader_epoch_cache.clear()
        self._log_start_offset = self._hw = offset
        self._producers.truncated_fully(offset)

    # ---- durability and lifecycle -------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment up to `offset` (default: the end) and advance the recovery
        point there."""
        with self.failure.guard("flushing %s", self.name):
            self._local.flush_to(offset)

    def flush_due(self, now_mono_ms: int | None = None) -> None:
        """Periodic work: fsync rolled segments, honour flush.ms, remove expired .deleted
        files."""
        with self.failure.guard("flushing %s", self.name):
            self._local.flush_due(self.clock.monotonic_ms() if now_mono_ms is None
                                  else now_mono_ms)

    def close(self) -> None:
        """Flush, trim and close every file. After a storage failure only releases them."""
        if self.failure.failed:
            self.release()
            return
        with self.failure.guard("closing %s", self.name):
            if self._producers.loaded or self._local.is_end_known:
                self._producers.snapshot(self._local.log_end_offset)
            self._local.close()

    def release(self) -> None:
        """Let go of every file without flushing (after a failure, or before deletion)."""
        self._local.release()

    def delete(self) -> None:
        """Remove the partition: rename its directory to `<topic>-<p>.<uuid>-delete` (so a
        crash midway leaves a directory the log manager finishes deleting), then remove it."""
        self.release()
        parent = os.path.dirname(self.dir)
        doomed = os.path.join(parent, delete_dir_name(self.topic, self.partition))
        with self.failure.guard("deleting %s", self.name):
            self.fs.rename(self.dir, doomed)
            self.fs.fsync_dir(parent)
            self.fs.remove_tree(doomed)

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, segments={len(self._local.segments)})"
