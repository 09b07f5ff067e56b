"""The ordered segments of one partition log (Kafka's LogSegments): lookups by offset."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from spark_log.storage.log.segment import Segment


class LogSegments:
    """Segments sorted by base offset; the last one is the active segment.

    Invariant: base offsets are unique and increasing. Not thread-safe.
    """

    def __init__(self, segments: list[Segment] | None = None) -> None:
        self._segments: list[Segment] = sorted(segments or [], key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[Segment]:
        return iter(list(self._segments))

    def __bool__(self) -> bool:
        return bool(self._segments)

    def to_list(self) -> list[Segment]:
        return list(self._segments)

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def first(self) -> Segment:
        return self._segments[0]

    def add(self, segment: Segment) -> None:
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._bases) and self._bases[i] == segment.base_offset:
            raise ValueError(f"a segment with base offset {segment.base_offset} already exists")
        self._bases.insert(i, segment.base_offset)
        self._segments.insert(i, segment)

    def remove(self, segment: Segment) -> None:
        i = self._bases.index(segment.base_offset)
        del self._bases[i], self._segments[i]

    def floor(self, offset: int) -> Segment | None:
        """The segment with the largest base offset <= `offset`."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    def higher(self, base_offset: int) -> Segment | None:
        """The segment after the one based at `base_offset`."""
        i = bisect.bisect_right(self._bases, base_offset)
        return self._segments[i] if i < len(self._segments) else None

    def overlapping(self, start: int, end: int) -> list[Segment]:
        """Segments that may hold offsets in [start, end): from the floor of `start` on."""
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        j = bisect.bisect_left(self._bases, end)
        return self._segments[i:j]

    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)
