"""The time index of a segment (`<base offset>.timeindex`): timestamp -> offset.

Kafka's format: 12-byte entries, big-endian (timestamp int64, relative offset int32). An entry
(T, O) says the largest timestamp in the segment up to offset O is T. Entries are appended only
when the segment's max timestamp grows, so both fields increase; the last slot is reserved for
the entry written when the segment is rolled, which records the segment's largest timestamp.
"""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import NamedTuple

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.index_file import IndexFile

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    """Invariants: timestamps strictly and offsets weakly increase; the last entry of an
    inactive segment carries its largest timestamp. Not thread-safe."""

    ENTRY = struct.Struct(">qi")
    RESERVED_SLOTS = 1  # the last slot takes the entry appended when the segment is rolled

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._last: TimestampOffset | None = None

    def _reset_cache(self) -> None:
        self._last = None

    def entry(self, slot: int) -> TimestampOffset:
        ts, rel = self._raw(slot)
        return TimestampOffset(ts, self.base_offset + rel)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when empty."""
        if self._last is None:
            n = self.entries
            self._last = self.entry(n - 1) if n else TimestampOffset(NO_TIMESTAMP,
                                                                      self.base_offset)
        return self._last

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, or (NO_TIMESTAMP, base offset)."""
        slot = self._largest_lower_bound(target_timestamp, 0)
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's."""
        self.load()
        if not skip_full_check and self.is_full:
            raise CorruptIndexError(f"attempt to append to a full time index {self.path}")
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise CorruptIndexError(f"attempt to append offset {offset} to {self.path} after "
                                    f"offset {last.offset}")
        if timestamp > last.timestamp:
            if self._entries >= self._length // self.ENTRY.size:
                self.resize(self._length + self.ENTRY.size)  # the roll-time entry of a full index
            self._write_raw(timestamp, self.relative(offset))
            self._last = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        self.load()
        kept = sum(1 for _, rel in self.raw_entries() if rel < offset - self.base_offset)
        self._truncate_entries(kept)

    def sanity_check(self) -> None:
        reason = self.check_size()
        if reason is None and self.entries:
            if any(a[0] >= b[0] or a[1] > b[1] for a, b in pairwise(self.raw_entries())):
                reason = "entries do not increase"
            elif self.entry(0).offset < self.base_offset:
                reason = "an offset is below the base offset"
        if reason:
            raise CorruptIndexError(f"corrupt time index {self.path}: {reason}")
