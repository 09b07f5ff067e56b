"""Streaming reads: Spark's micro-batch source contract over Kafka offsets.

Offsets are Spark's Kafka JSON (`{"topic":{"0":23}}`), so checkpoints read like Spark's own.
`initialOffset` resolves startingOffsets (or timestamps, or `group`) once; a restarted query
resumes from its checkpoint instead. `latestOffset(start, limit)` looks up every subscribed
partition's end and applies admission control (`planner.admit`, `planner.should_wait`);
partitions that appear later (new partitions, new topics matching a pattern) are read from their
earliest offset. With Trigger.AvailableNow, `prepareForTriggerAvailableNow` pins the ends seen
then, and the query stops once it has read up to them (in several batches if limits apply).
`commit(end)` reports progress to the query's consumer group (`group_offsets`); with
commitOffsets=transactional the source instead publishes each batch's end offsets as it plans
the batch, for a pylog sink to commit in its transactions (`planned_offsets`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .client import Cluster, bootstrap_for, sample_record_sizes
from .group_offsets import GroupCommitter
from .offsets import Offsets, offsets_from_json, offsets_to_json
from .options import SourceOptions
from .planned_offsets import publish
from .planner import OffsetRange, admit, should_wait, split_ranges, total_backlog
from .range_reader import RangePartition, data_loss, read_range
from .reader import default_group, make_builder
from .resolve import resolve
from .wire_cluster import open_cluster

log = logging.getLogger(__name__)


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One streaming query's source. Lives in Spark's driver-side Python runner for the whole
    run, so it keeps state between calls (AvailableNow target, last trigger time, estimates).

    Invariant: an offset returned by `latestOffset` is >= `start` for every partition in
    `start` (except partitions reported lost with failOnDataLoss=false) and never beyond the
    partition's end (or the AvailableNow target).
    """

    def __init__(self, opts: SourceOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema
        self.bootstrap = bootstrap_for(opts.client)
        self.group = default_group(opts)
        self._cluster: Cluster | None = None
        self._target: Offsets | None = None
        self._last_trigger_ms = 0.0
        self._latest: Offsets = {}
        self._sizes: dict[tuple[str, int], float] = {}
        self._committer: GroupCommitter | None = None

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = open_cluster(self.bootstrap, self.opts.client.kafka_conf,
                                         self.opts.client.timeout_ms)
        return self._cluster

    # ---- offsets -------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = self.cluster.partitions_for(self.opts.subscription)
        starts = resolve(self.cluster, self.opts.starting, tps, is_start=True,
                         option="startingOffsets", strategy=self.opts.starting_strategy,
                         group=self.group)
        return offsets_to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.cluster.partitions_for(self.opts.subscription, must_exist=False)
        self._target = self.cluster.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        # Spark asks for the next batch only after the previous one (ending at `start`)
        # completed; this also covers the last batch of an AvailableNow run, which Spark never
        # passes to commit().
        self._report(begin)
        latest = self._current_ends()
        begin = self._drop_lost(begin, latest)
        new = [tp for tp in latest if tp not in begin]
        begin.update(self.cluster.earliest(new))
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) if tp in self._target else begin[tp]
                      for tp, end in latest.items()}
        end = self._limit(begin, latest, limit)
        return offsets_to_json(end)

    def _current_ends(self) -> Offsets:
        tps = self.cluster.partitions_for(self.opts.subscription, must_exist=False)
        self._latest = self.cluster.latest(tps)
        return dict(self._latest)

    def _drop_lost(self, begin: Offsets, latest: Offsets) -> Offsets:
        gone = sorted(tp for tp in begin if tp not in latest)
        if gone:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            data_loss(f"Partitions {names} were deleted.", self.opts.fail_on_data_loss)
        return {tp: off for tp, off in begin.items() if tp in latest}

    def _limit(self, begin: Offsets, latest: Offsets, limit: ReadLimit) -> Offsets:
        o = self.opts
        if isinstance(limit, ReadAllAvailable):
            return {tp: max(latest[tp], begin[tp]) for tp in latest}
        now_ms = time.time() * 1000
        if self._target is None and should_wait(
                total_backlog(begin, latest), o.min_offsets_per_trigger, self._last_trigger_ms,
                now_ms, o.max_trigger_delay_ms):
            return begin
        self._last_trigger_ms = now_ms
        sizes = self._record_sizes(begin, latest) if o.max_bytes_per_trigger else None
        return admit(begin, latest, o.max_offsets_per_trigger, o.max_bytes_per_trigger, sizes)

    def _record_sizes(self, begin: Offsets, latest: Offsets) -> dict[tuple[str, int], float]:
        todo = {tp: off for tp, off in begin.items() if latest.get(tp, off) > off
                and tp not in self._sizes}
        if todo:
            self._sizes.update(sample_record_sizes(self.bootstrap, self.opts.client.kafka_conf,
                                                   todo))
        return self._sizes

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    # ---- planning and reading ------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.cluster.earliest(new))
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin[tp]
            if stop < first:
                data_loss(f"Offsets of {tp[0]}-{tp[1]} went back from {first} to {stop} (the "
                          "topic was probably deleted and re-created).",
                          self.opts.fail_on_data_loss)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        o = self.opts
        if o.publish_planned:
            publish(self.cluster, self.group, until)
        return [RangePartition(r.topic, r.partition, r.start, r.end, self.bootstrap,
                               dict(o.client.kafka_conf), o.fail_on_data_loss, o.poll_timeout_ms,
                               o.direct_fetch)
                for r in split_ranges(ranges, o.min_partitions, o.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, RangePartition):
            return  # Spark reads one empty partition when there are none
        yield from read_range(partition, make_builder(self.opts, self.schema))

    # ---- progress ------------------------------------------------------------------------
    def commit(self, end: dict) -> None:
        self._report(offsets_from_json(end))

    def _report(self, offsets: Offsets) -> None:
        if not self.opts.commit_offsets or not offsets:
            return
        if self._committer is None:
            self._committer = GroupCommitter(self.bootstrap, self.opts.client.kafka_conf,
                                             self.group, self.opts.client.timeout_ms)
        self._committer.commit(offsets)

    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
