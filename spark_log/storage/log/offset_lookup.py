"""ListOffsets for one partition log: special timestamps, search by timestamp, max timestamp
(Kafka's UnifiedLog.fetchOffsetByTimestamp)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from spark_log.storage.log.timestamp_search import RecordSearch, TimestampAndOffset

if TYPE_CHECKING:
    from spark_log.storage.log.leader_epoch import LeaderEpochCache
    from spark_log.storage.log.segment import Segment

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
NO_TIMESTAMP = -1


class SegmentedLog(Protocol):
    """What the lookups read of a partition log (a `PartitionLog`, which owns this lookup)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def segments(self) -> Sequence[Segment]: ...

    leader_epoch_cache: LeaderEpochCache


class OffsetLookup:
    """Read-only queries over a partition log's segments; the log guards them for I/O errors.
    Not thread-safe (runs on the log's thread)."""

    def __init__(self, log: SegmentedLog, search: RecordSearch) -> None:
        self._log = log
        self._search = search

    def list_offset(self, timestamp: int) -> TimestampAndOffset | None:
        log, epochs = self._log, self._log.leader_epoch_cache
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            first = epochs.earliest_entry()
            epoch = first.epoch if first is not None and first.start_offset <= start else None
            return TimestampAndOffset(NO_TIMESTAMP, start, epoch)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, log.log_end_offset, epochs.latest_epoch())
        if timestamp == LATEST_TIERED_TIMESTAMP:  # nothing is tiered
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp()
        if timestamp < 0:
            raise ValueError(f"unsupported ListOffsets timestamp {timestamp}")
        return self.for_timestamp(timestamp)

    def for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record at or after the log start offset with timestamp >= `timestamp`."""
        start = self._log.log_start_offset
        for segment in self._log.segments:
            if segment.largest_timestamp() >= timestamp:
                return segment.find_offset_by_timestamp(timestamp, start, self._search)
        return None

    def max_timestamp(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (ListOffsets -3); None if no timestamps."""
        segments = self._log.segments
        best = max(segments, key=lambda s: s.max_timestamp_so_far().timestamp)
        return best.offset_of_max_timestamp(self._search)
