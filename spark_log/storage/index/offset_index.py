"""The offset index of a segment (`<base offset>.index`): offset -> byte position in the .log.

Kafka's format: 8-byte entries, big-endian (relative offset int32, file position int32). An
entry (O, P) says the batch at position P ends with offset O. The index is sparse (one entry per
index.interval.bytes of log), so a lookup returns the largest entry <= the target and the caller
scans forward from its position.
"""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import NamedTuple

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.index_file import IndexFile


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    """Invariants (on top of IndexFile's): relative offsets and positions strictly increase;
    every offset fits an int32 relative to the base offset. Not thread-safe."""

    ENTRY = struct.Struct(">ii")

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._last: OffsetPosition | None = None

    def _reset_cache(self) -> None:
        self._last = None

    def entry(self, slot: int) -> OffsetPosition:
        rel, pos = self._raw(slot)
        return OffsetPosition(self.base_offset + rel, pos)

    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base offset, 0) when empty."""
        if self._last is None:
            n = self.entries
            self._last = self.entry(n - 1) if n else OffsetPosition(self.base_offset, 0)
        return self._last

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, or (base offset, 0) if there is none."""
        slot = self._largest_lower_bound(target_offset - self.base_offset, 0)
        return self.entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def floor_by_position(self, position: int) -> OffsetPosition | None:
        """Largest entry whose batch starts at or before `position`, or None."""
        slot = self._largest_lower_bound(position, 1)
        return self.entry(slot) if slot >= 0 else None

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def append(self, offset: int, position: int) -> None:
        self.load()
        if self._entries and offset <= self.last_offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to {self.path} after offset "
                f"{self.last_offset}")
        self._write_raw(self.relative(offset), position)
        self._last = OffsetPosition(offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        self._truncate_entries(self._first_slot_at_least(offset - self.base_offset, 0))

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError unless entries strictly increase and stay inside the log."""
        reason = self.check_size()
        if reason is None and self.entries:
            first, last = self.entry(0), self.last_entry()
            if any(a[0] >= b[0] or a[1] >= b[1] for a, b in pairwise(self.raw_entries())):
                reason = "entries do not strictly increase"
            elif first.offset < self.base_offset:
                reason = f"offset {first.offset} is below the base offset"
            elif not 0 <= last.position < log_size:
                reason = f"last position {last.position} is past the log's {log_size} bytes"
        if reason:
            raise CorruptIndexError(f"corrupt offset index {self.path}: {reason}")
