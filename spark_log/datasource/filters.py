"""Filters pushed down by Spark (`DataSourceReader.pushFilters`) -> bounds on what to read.

Filters on `topic`, `partition` and `offset` are exact: they select partitions and cut offset
ranges, and Spark need not evaluate them again. Filters on `timestamp` become offset bounds
through ListOffsets by timestamp (the first offset at or after a time): the lower bound is exact,
the upper bound assumes timestamps do not decrease within a partition (always true for
LogAppendTime, as Kafka's own offsetsForTimes assumes), and Spark still evaluates every
timestamp filter on the rows read, so results are exact within the ranges read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .planner import OffsetRange

_INF = 2**63 - 1


@dataclass(frozen=True)
class Bounds:
    """Conjunction of pushed filters. Offsets/timestamps are [low, high) half-open."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    offset_low: int = 0
    offset_high: int = _INF
    ts_low_ms: int | None = None
    ts_high_ms: int | None = None  # exclusive
    pushed: tuple[Any, ...] = field(default=(), compare=False)

    def keeps(self, topic: str, partition: int) -> bool:
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions))

    def cut(self, r: OffsetRange) -> OffsetRange:
        start = max(r.start, self.offset_low)
        end = max(start, min(r.end, self.offset_high))
        return replace(r, start=start, end=end)


def _ms(value: Any) -> int | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return None


def _ceil_ms(value: Any) -> int | None:
    """Milliseconds rounded up (a bound in microseconds that is not a whole millisecond)."""
    ms = _ms(value)
    if ms is None:
        return None
    return ms + (1 if value.microsecond % 1000 else 0)


def push(filters: Iterable[Any]) -> tuple[Bounds, list[Any]]:
    """Bounds implied by `filters`, and the filters Spark must still evaluate."""
    from pyspark.sql import datasource as ds

    bounds = Bounds()
    remaining: list[Any] = []
    for f in filters:
        column = f.attribute[0] if len(f.attribute) == 1 else None
        new = _apply(bounds, f, column, ds)
        if new is None:
            remaining.append(f)
            continue
        bounds = new
        if column == "timestamp":
            remaining.append(f)
    return bounds, remaining


def _apply(b: Bounds, f: Any, column: str | None, ds: Any) -> Bounds | None:
    if column in ("partition", "topic"):
        values = _values(f, ds)
        if values is None:
            return None
        if column == "partition":
            if not all(isinstance(v, int) for v in values):
                return None
            keep = frozenset(values) if b.partitions is None else b.partitions & set(values)
            return replace(b, partitions=keep)
        if not all(isinstance(v, str) for v in values):
            return None
        keep_t = frozenset(values) if b.topics is None else b.topics & set(values)
        return replace(b, topics=keep_t)
    if column == "offset":
        return _offset(b, f, ds)
    if column == "timestamp":
        return _timestamp(b, f, ds)
    return None


def _values(f: Any, ds: Any) -> list[Any] | None:
    if isinstance(f, ds.EqualTo | ds.EqualNullSafe):
        return [f.value]
    if isinstance(f, ds.In):
        return list(f.value)
    return None


def _offset(b: Bounds, f: Any, ds: Any) -> Bounds | None:
    v = getattr(f, "value", None)
    if isinstance(v, bool) or not isinstance(v, int):  # In (sparse offsets), IsNull, ...
        return None
    low, high = {
        ds.EqualTo: (v, v + 1), ds.GreaterThan: (v + 1, _INF),
        ds.GreaterThanOrEqual: (v, _INF), ds.LessThan: (0, v), ds.LessThanOrEqual: (0, v + 1),
    }.get(type(f), (None, None))
    if low is None:
        return None
    return replace(b, offset_low=max(b.offset_low, low), offset_high=min(b.offset_high, high))


def _timestamp(b: Bounds, f: Any, ds: Any) -> Bounds | None:
    if not hasattr(f, "value"):
        return None
    if isinstance(f, ds.EqualTo | ds.GreaterThanOrEqual | ds.GreaterThan):
        low = _ms(f.value)
        if low is None:
            return None
        b = replace(b, ts_low_ms=max(b.ts_low_ms or 0, low))
        if isinstance(f, ds.EqualTo):
            return replace(b, ts_high_ms=_min(b.ts_high_ms, low + 1))
        return b
    if isinstance(f, ds.LessThan | ds.LessThanOrEqual):
        high = _ceil_ms(f.value) if isinstance(f, ds.LessThan) else _ms(f.value)
        if high is None:
            return None
        if isinstance(f, ds.LessThanOrEqual):
            high += 1
        return replace(b, ts_high_ms=_min(b.ts_high_ms, high))
    return None


def _min(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)
