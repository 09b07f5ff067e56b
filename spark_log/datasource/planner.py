"""Pure planning: offset ranges -> task ranges, and how far a micro-batch may read.

No I/O here. `split_ranges` follows Spark's KafkaOffsetRangeCalculator: one task per partition
unless `minPartitions` asks for more, in which case big partitions are cut in proportion to their
share of the data; `maxRecordsPerPartition` then caps every task's size. `admit` is the admission
control of a micro-batch: `maxOffsetsPerTrigger` / `maxBytesPerTrigger` are shared between the
partitions in proportion to their backlog, and every partition with a backlog gets at least one
offset, so none is starved. `should_wait` is `minOffsetsPerTrigger` with `maxTriggerDelay`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets [start, end) of one partition. Invariant: 0 <= start <= end."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Cut `ranges` into tasks; the union of the result is exactly the union of `ranges`
    (empty ranges are dropped)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(ranges) < min_partitions:
        ranges = _split_for_min_partitions(ranges, min_partitions)
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _cut(r, math.ceil(r.size / max_records))]
    return ranges


def _split_for_min_partitions(ranges: list[OffsetRange], min_partitions: int
                              ) -> list[OffsetRange]:
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    ideal = total / min_partitions
    result: list[OffsetRange] = []
    for r in ranges:
        # Spark rounds half up (Math.round); Python's round() would round half to even.
        parts = max(math.floor(r.size / ideal + 0.5), 1)
        result.extend(_cut(r, parts))
    return result


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` consecutive pieces of nearly equal size (the last ones take the remainder)."""
    parts = max(1, min(parts, r.size))
    pieces: list[OffsetRange] = []
    start, remaining = r.start, r.size
    for i in range(parts):
        size = remaining // (parts - i)
        pieces.append(OffsetRange(r.topic, r.partition, start, start + size))
        start += size
        remaining -= size
    return [p for p in pieces if p.size > 0]


def admit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
          max_offsets: int | None = None, max_bytes: int | None = None,
          bytes_per_offset: Mapping[TopicPartition, float] | None = None
          ) -> dict[TopicPartition, int]:
    """End offsets of the next micro-batch: `latest`, cut down by the limits.

    Every partition of `latest` appears in the result; a partition missing from `start` starts
    at `latest` minus nothing (its caller adds it to `start` first). The result never goes
    below `start` nor above `latest`.
    """
    end = dict(latest)
    backlog = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start.get(tp, 0)}
    if not backlog:
        return {tp: max(end[tp], start.get(tp, end[tp])) for tp in end}
    if max_offsets is not None:
        _apply(end, start, _share(backlog, max_offsets))
    if max_bytes is not None:
        sizes = bytes_per_offset or {}
        weights = {tp: n * max(sizes.get(tp, 1.0), 1.0) for tp, n in backlog.items()}
        byte_shares = _share(weights, max_bytes)
        _apply(end, start, {tp: max(1, int(byte_shares[tp] / max(sizes.get(tp, 1.0), 1.0)))
                            for tp in byte_shares})
    return end


def _apply(end: dict[TopicPartition, int], start: Mapping[TopicPartition, int],
           quota: Mapping[TopicPartition, int]) -> None:
    for tp, n in quota.items():
        end[tp] = min(end[tp], start[tp] + n)


def _share(weights: Mapping[TopicPartition, float], limit: int) -> dict[TopicPartition, int]:
    """Split `limit` in proportion to `weights` (whole units, largest remainders first, none
    above its weight). Every partition gets at least 1, taken from the biggest shares; only when
    `limit` is below the number of partitions does the total exceed it."""
    total = float(sum(weights.values()))
    exact = {tp: limit * w / total for tp, w in weights.items()}
    quota = {tp: min(math.floor(x), math.ceil(weights[tp])) for tp, x in exact.items()}
    for tp in quota:
        quota[tp] = max(quota[tp], 1)  # no partition starves
    excess = sum(quota.values()) - limit
    while excess > 0:
        biggest = max(quota, key=lambda t: quota[t])
        if quota[biggest] <= 1:
            break
        quota[biggest] -= 1
        excess -= 1
    spare = limit - sum(quota.values())
    for tp in sorted(exact, key=lambda t: quota[t] - exact[t]):
        if spare <= 0:
            break
        if quota[tp] < weights[tp]:
            quota[tp] += 1
            spare -= 1
    return quota


def total_backlog(start: Mapping[TopicPartition, int],
                  latest: Mapping[TopicPartition, int]) -> int:
    return sum(max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest)


def should_wait(backlog: int, min_offsets: int | None, last_trigger_ms: float,
                now_ms: float, max_delay_ms: int) -> bool:
    """minOffsetsPerTrigger: skip this trigger while fewer offsets are waiting, unless
    maxTriggerDelay has passed since the last batch that ran."""
    if min_offsets is None or backlog >= min_offsets:
        return False
    return now_ms - last_trigger_ms < max_delay_ms
