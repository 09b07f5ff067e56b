"""Batch reads: options -> offset ranges (driver) -> Arrow batches (executors).

The driver resolves the subscription and the starting/ending offsets once, cuts them by the
pushed-down filters, checks for data loss (a start below the log start), and splits the ranges
into tasks (`planner.split_ranges`). Tasks read with `range_reader.read_range`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .arrow import BatchBuilder
from .client import Cluster, bootstrap_for
from .filters import Bounds, push
from .options import SourceOptions
from .planner import OffsetRange, split_ranges
from .range_reader import RangePartition, data_loss, read_range
from .resolve import resolve
from .wire_cluster import open_cluster

log = logging.getLogger(__name__)


class PylogBatchReader(DataSourceReader):
    """Reads [startingOffsets, endingOffsets) of the subscribed partitions.

    Invariant: `partitions()` returns ranges inside [log start, end] of each partition, so tasks
    only read offsets that existed when the query was planned.
    """

    def __init__(self, opts: SourceOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema
        self.bounds = Bounds()
        self.bootstrap = bootstrap_for(opts.client)

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan_batch(self.opts, self.bootstrap, self.bounds)
        return [self._task(r) for r in split_ranges(
            ranges, self.opts.min_partitions, self.opts.max_records_per_partition)]

    def _task(self, r: OffsetRange) -> RangePartition:
        return RangePartition(r.topic, r.partition, r.start, r.end, self.bootstrap,
                              dict(self.opts.client.kafka_conf), self.opts.fail_on_data_loss,
                              self.opts.poll_timeout_ms, self.opts.direct_fetch)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, RangePartition):
            return  # Spark reads one empty partition when there are none
        yield from read_range(partition, make_builder(self.opts, self.schema))


class PylogPushdownReader(PylogBatchReader):
    """A batch reader that also takes Spark's filters on partition, offset and timestamp."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        self.bounds, remaining = push(filters)
        return remaining


def make_builder(opts: SourceOptions, schema: Any) -> BatchBuilder:
    key_decoder = value_decoder = None
    if opts.avro.key_format == "avro":
        from .avro import make_decoder

        key_decoder = make_decoder(opts.avro.key_schema or "", opts.avro.wire_format,
                                   "keyAvroSchema")
    if opts.avro.value_format == "avro":
        from .avro import make_decoder

        value_decoder = make_decoder(opts.avro.value_schema or "", opts.avro.wire_format,
                                     "avroSchema")
    return BatchBuilder(schema, opts.include_headers, key_decoder, value_decoder)


def plan_batch(opts: SourceOptions, bootstrap: str, bounds: Bounds) -> list[OffsetRange]:
    """The offset ranges a batch query reads, one per partition (before splitting)."""
    cluster = open_cluster(bootstrap, opts.client.kafka_conf, opts.client.timeout_ms)
    try:
        tps = [tp for tp in cluster.partitions_for(opts.subscription) if bounds.keeps(*tp)]
        starts = resolve(cluster, opts.starting, tps, is_start=True, option="startingOffsets",
                         strategy=opts.starting_strategy, group=default_group(opts))
        assert opts.ending is not None
        ends = resolve(cluster, opts.ending, tps, is_start=False, option="endingOffsets")
        starts = _check_start(cluster, starts, opts.fail_on_data_loss)
        ranges = [bounds.cut(OffsetRange(t, p, starts[(t, p)], max(starts[(t, p)], ends[(t, p)])))
                  for t, p in tps]
        return _cut_by_time(cluster, ranges, bounds)
    finally:
        cluster.close()


def default_group(opts: SourceOptions) -> str:
    """The consumer group of a query: `groupId`, else groupIdPrefix + a stable digest of the
    subscription (a restarted query reports under the same group)."""
    if opts.group_id:
        return opts.group_id
    import hashlib

    digest = hashlib.sha256(opts.subscription.describe().encode()).hexdigest()[:16]
    return f"{opts.group_id_prefix}-{digest}"


def _check_start(cluster: Cluster, starts: dict[tuple[str, int], int],
                 fail: bool) -> dict[tuple[str, int], int]:
    earliest = cluster.earliest(list(starts))
    lost = {tp: (off, earliest[tp]) for tp, off in starts.items() if off < earliest[tp]}
    if lost:
        names = ", ".join(f"{t}-{p} [{a}, {b})" for (t, p), (a, b) in sorted(lost.items()))
        data_loss(f"Starting offsets are below the log start: offsets {names} were deleted.",
                  fail)
    return {tp: max(off, earliest[tp]) for tp, off in starts.items()}


def _cut_by_time(cluster: Cluster, ranges: list[OffsetRange], bounds: Bounds
                 ) -> list[OffsetRange]:
    if bounds.ts_low_ms is None and bounds.ts_high_ms is None:
        return ranges
    live = [r for r in ranges if r.size > 0]
    low = cluster.for_times({r.tp: bounds.ts_low_ms for r in live}) \
        if bounds.ts_low_ms is not None else {}
    high = cluster.for_times({r.tp: bounds.ts_high_ms for r in live}) \
        if bounds.ts_high_ms is not None else {}
    result = []
    for r in live:
        start, end = r.start, r.end
        if r.tp in low:
            start = max(start, low[r.tp] if low[r.tp] >= 0 else end)
        if r.tp in high and high[r.tp] >= 0:
            end = min(end, high[r.tp])
        result.append(OffsetRange(r.topic, r.partition, min(start, end), end))
    return result

