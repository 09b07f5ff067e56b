"""The work of one cleaning round on one log (Kafka's Cleaner): build the offset map over the
dirty section, group the segments from the start of the log up to where the map reaches, and
rewrite each group into one cleaned segment.

A round is planned on the thread that owns the log (`plan_round`): it snapshots the segments to
read, each with an open handle on its .log file, so the work itself (`build_offset_map`,
`clean_group`) touches no shared state and can run on a worker thread while the log keeps
serving appends and reads. Both are generators that yield after each step of their walk (a
batch, or under the default batch policy a run of batches walked in one native call: see
`OffsetMap.walk_bytes`), so a driver can also run them inline on an event loop; their return
value is the result. The cleaned segment they build belongs to the worker until it is returned;
swapping it in is the owner's job (`PartitionLog.replace_segments`).

Reads go through `os.pread` into private buffers (never an mmap of a file another thread may
truncate), a chunk of whole batches at a time; a batch larger than the chunk is read whole.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field

from spark_log.clock import Clock
from spark_log.records.batch_header import HEADER_SIZE, BatchHeader, peek_size
from spark_log.records.batch_walk import WALK_CALLER, WALK_FULL
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record_batch import BatchView
from spark_log.records.record_scan import whole_batches
from spark_log.storage.cleaner.cleaner_batch_policy import (
    BatchPolicy,
    BatchPolicyFactory,
    is_default,
)
from spark_log.storage.cleaner.cleaner_filter import FilterStats, RecordFilter
from spark_log.storage.cleaner.cleaner_offset_map import OffsetMap
from spark_log.storage.cleaner.log_to_clean import LogToClean
from spark_log.storage.filesystem import Buffer, FileSystem
from spark_log.storage.index.transaction_index import AbortedTxn
from spark_log.storage.log.file_records import FetchSlice
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.segment import Segment
from spark_log.storage.log.segment_files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_file_name,
)

INT32_MAX = 2**31 - 1


class CleaningAborted(Exception):
    """The round was asked to stop (shutdown, or its log is being deleted)."""


@dataclass(frozen=True)
class SegmentSource:
    """One segment as a round reads it. `data` spans the whole .log file and holds its fd open,
    so the segment may be deleted meanwhile; `segment` is only compared at swap time."""

    segment: Segment
    next_offset: int  # base offset of the segment after it
    size: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int
    data: FetchSlice
    path: str
    aborted_txns: tuple[AbortedTxn, ...]  # its transaction index

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset


@dataclass
class CleanerStats:
    """What one round did (Kafka's CleanerStats). Times are monotonic seconds."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    filter: FilterStats = field(default_factory=FilterStats)
    started: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    ended: float = 0.0
    groups: int = 0


@dataclass
class CleaningRound:
    """A planned round: an immutable snapshot of what to read plus the round's private state.

    Thread-safety: the worker reads the snapshot and owns the stats and policies; the owner of
    the log only sets `abort` (a threading.Event) while the work runs.
    """

    log: PartitionLog  # never touched by the worker; compared and swapped into by the owner
    directory: str
    name: str
    config: LogConfig
    clock: Clock
    fs: FileSystem
    now_ms: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_start_position: int
    sources: list[SegmentSource]
    map_policy: BatchPolicy
    clean_policy: BatchPolicy
    abort: threading.Event = field(default_factory=threading.Event)
    stats: CleanerStats = field(default_factory=CleanerStats)

    def check_done(self) -> None:
        if self.abort.is_set():
            raise CleaningAborted(f"cleaning of {self.name} aborted")


def plan_round(candidate: LogToClean, *, clock: Clock, policy: BatchPolicyFactory
               ) -> CleaningRound:
    """Snapshot the segments of `candidate` below its first uncleanable offset. Call on the
    thread that owns the log."""
    partition_log = candidate.log
    segments = partition_log.segments
    end = candidate.first_uncleanable_offset
    sources = []
    for i, segment in enumerate(segments):
        if segment.base_offset >= end:
            break
        sizes = segment.index_file_sizes()
        sources.append(SegmentSource(
            segment, segments[i + 1].base_offset, segment.size, sizes[0], sizes[1],
            segment.log.last_modified_ms, segment.log.slice(0, segment.size), segment.log.path,
            tuple(segment.txn_index.entries)))
    first_dirty = candidate.first_dirty_offset
    holding = next((s for s in sources if s.next_offset > first_dirty), None)
    position = holding.segment.offset_index.lookup(first_dirty).position if holding else 0
    return CleaningRound(
        partition_log, partition_log.dir, partition_log.name, partition_log.config, clock,
        partition_log.fs, clock.now_ms(),
        first_dirty, end, position, sources,
        policy(partition_log, first_dirty, end), policy(partition_log, 0, end))


def build_offset_map(rnd: CleaningRound, offset_map: OffsetMap, io_size: int
                     ) -> Generator[None, None, int]:
    """Map every key of the dirty section to its latest offset, until the map is full; returns
    the end of the mapped range (the offset the checkpoint moves to). Yields after each
    step."""
    offset_map.clear()
    start = rnd.first_dirty_offset
    dirty = [s for s in rnd.sources if s.next_offset > start]
    stats = rnd.stats
    full = False
    for i, source in enumerate(dirty):
        position = rnd.dirty_start_position if i == 0 else 0
        for chunk in read_chunks(source, position, io_size):
            rnd.check_done()
            stats.map_bytes_read += len(chunk)
            pos = 0
            while pos < len(chunk) and not full:
                pos, full = _map_step(rnd.map_policy, offset_map, chunk, pos, start, stats)
                yield
            if full:
                break
        if full:
            break
        offset_map.update_latest_offset(source.next_offset - 1)
    if is_default(rnd.map_policy):
        offset_map.checked_through(start)
    stats.map_done = time.monotonic()
    return max(offset_map.latest_offset + 1, start)


def _map_step(policy: BatchPolicy, offset_map: OffsetMap, chunk: memoryview, pos: int,
              start: int, stats: CleanerStats) -> tuple[int, bool]:
    """Map the batches of `chunk` from `pos` for one step: (where it ended, whether the map is
    full). Under the default policy a step is many batches (`OffsetMap.map_batches`), and a
    batch it leaves (compressed) is mapped here, as under any other policy."""
    if is_default(policy):
        pos, records, stop = offset_map.map_batches(chunk, pos, start)
        stats.map_messages_read += records
        if stop != WALK_CALLER:
            return pos, stop == WALK_FULL
    view = BatchView(chunk, pos)
    return pos + view.size, not _map_batch(policy, offset_map, view, start, stats)


def _map_batch(policy: BatchPolicy, offset_map: OffsetMap, view: BatchView, start: int,
               stats: CleanerStats) -> bool:
    """Map the batch; False (nothing mapped) when the map is too full for it."""
    header = view.header
    if header.last_offset < start:
        return True
    if policy.include_in_offset_map(header) and header.records_count:
        if offset_map.size and not offset_map.has_room(header.records_count):
            return False
        offset_map.put_batch(view, start)
        stats.map_messages_read += header.records_count
    offset_map.update_latest_offset(header.last_offset)
    return True


def group_segments(sources: list[SegmentSource], max_size: int, max_index_size: int,
                   first_uncleanable_offset: int) -> list[list[SegmentSource]]:
    """Consecutive segments grouped so that each group's log and index bytes fit one segment
    and its offsets fit 32 bits relative to its base (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentSource]] = []
    i = 0
    while i < len(sources):
        group = [sources[i]]
        log_size, index_size, time_size = (sources[i].size, sources[i].index_bytes,
                                           sources[i].time_index_bytes)
        i += 1
        while i < len(sources):
            nxt = sources[i]
            last = sources[i + 1].base_offset - 1 if i + 1 < len(sources) \
                else first_uncleanable_offset - 1
            if log_size + nxt.size > max_size or index_size + nxt.index_bytes > max_index_size \
                    or time_size + nxt.time_index_bytes > max_index_size \
                    or (nxt.size > 0 and last - group[0].base_offset > INT32_MAX):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.index_bytes
            time_size += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def clean_group(rnd: CleaningRound, group: list[SegmentSource], offset_map: OffsetMap,
                io_size: int) -> Generator[None, None, Segment]:
    """Rewrite `group` into one segment with `.cleaned` file names, written and fsynced;
    returns it. Its files are removed if the work stops early. Yields after each step."""
    base = group[0].base_offset
    remove_cleaned_files(rnd.directory, base, rnd.fs)
    cleaned = Segment(rnd.directory, base, rnd.config, clock=rnd.clock, fs=rnd.fs,
                      active=True, create=True, suffix=CLEANED_SUFFIX)
    filt = RecordFilter(offset_map, rnd.clean_policy, now_ms=rnd.now_ms,
                        delete_retention_ms=rnd.config.delete_retention_ms,
                        upper_bound_offset=rnd.first_uncleanable_offset)
    try:
        for source in group:
            for chunk in read_chunks(source, 0, io_size):
                rnd.check_done()
                buffers: list[Buffer] = []
                headers: list[BatchHeader] = []
                pos = 0
                while pos < len(chunk):
                    pos = filt.filter_step(chunk, pos, buffers, headers)
                    yield
                cleaned.append(buffers, headers)
            for txn in source.aborted_txns:  # those whose ABORT marker is still there
                if txn.last_offset in filt.kept_markers:
                    cleaned.txn_index.append(txn)
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.set_last_modified(group[-1].last_modified_ms)
    except BaseException:
        cleaned.delete_files()
        raise
    _add_stats(rnd.stats.filter, filt.stats)
    rnd.stats.groups += 1
    return cleaned


def remove_cleaned_files(directory: str, base_offset: int, fs: FileSystem) -> None:
    """Remove `.cleaned` files at `base_offset` left by an earlier, interrupted round."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            fs.remove(os.path.join(directory,
                                   segment_file_name(base_offset, suffix + CLEANED_SUFFIX)))


def read_chunks(source: SegmentSource, position: int, io_size: int) -> Iterator[memoryview]:
    """Whole batches of `source` from `position`, about `io_size` bytes at a time."""
    if source.size == 0:
        return
    fd = source.data.fileno()
    while position < source.size:
        buf = os.pread(fd, min(io_size, source.size - position), position)
        whole = whole_batches(buf)
        if whole == 0:
            size = peek_size(buf)
            if size is None or size < HEADER_SIZE or position + size > source.size:
                raise CorruptRecordError(f"{source.path}: no whole batch at byte {position}")
            buf = os.pread(fd, size, position)
            whole = len(buf)
            if whole != size:
                raise CorruptRecordError(f"{source.path}: short read at byte {position}")
        yield memoryview(buf)[:whole]
        position += whole


def _add_stats(total: FilterStats, part: FilterStats) -> None:
    for name in total.__dataclass_fields__:
        setattr(total, name, getattr(total, name) + getattr(part, name))
