"""Offset specs -> concrete offsets, asking the cluster (driver side only).

-2/-1 become each partition's earliest/latest offset, timestamps become the first offset at or
after them (ListOffsets by timestamp, the same lookup as Kafka's offsetsForTimes), `group`
becomes the consumer group's committed offsets. Partitions a JSON spec leaves out take the
default: earliest for a start, latest for an end.
"""

from __future__ import annotations

from collections.abc import Mapping

from .client import Cluster
from .errors import PylogOptionError, PylogTopicError
from .offsets import (
    EARLIEST,
    LATEST,
    EarliestSpec,
    GroupSpec,
    LatestSpec,
    OffsetSpecT,
    OffsetsSpec,
    TimestampSpec,
    TimestampsSpec,
    TopicPartition,
)

Offsets = dict[TopicPartition, int]


def resolve(cluster: Cluster, spec: OffsetSpecT, tps: list[TopicPartition], *, is_start: bool,
            option: str, strategy: str = "error", group: str | None = None) -> Offsets:
    if not tps:
        return {}
    if isinstance(spec, EarliestSpec):
        return cluster.earliest(tps)
    if isinstance(spec, LatestSpec):
        return cluster.latest(tps)
    if isinstance(spec, OffsetsSpec):
        return _specific(cluster, spec.offsets, tps, is_start, option)
    if isinstance(spec, TimestampSpec):
        return _by_time(cluster, {tp: spec.timestamp for tp in tps}, tps, is_start, option,
                        strategy)
    if isinstance(spec, TimestampsSpec):
        _check_known(spec.timestamps, tps, option)
        return _by_time(cluster, dict(spec.timestamps), tps, is_start, option, strategy)
    if isinstance(spec, GroupSpec):
        assert group is not None
        committed = cluster.committed(group, tps)
        missing = [tp for tp in tps if tp not in committed]
        return {**cluster.earliest(missing), **committed}
    raise AssertionError(spec)


def _check_known(given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                 option: str) -> None:
    unknown = sorted(set(given) - set(tps))
    if unknown:
        raise PylogTopicError(
            f"Option '{option}' names partitions the query does not read (they do not exist or "
            f"are not subscribed): {', '.join(f'{t}-{p}' for t, p in unknown)}.")


def _specific(cluster: Cluster, given: Mapping[TopicPartition, int], tps: list[TopicPartition],
              is_start: bool, option: str) -> Offsets:
    _check_known(given, tps, option)
    default = EARLIEST if is_start else LATEST
    wanted = {tp: given.get(tp, default) for tp in tps}
    earliest = cluster.earliest([tp for tp, off in wanted.items() if off == EARLIEST])
    latest = cluster.latest([tp for tp, off in wanted.items() if off == LATEST])
    return {tp: earliest.get(tp, latest.get(tp, off)) for tp, off in wanted.items()}


def _by_time(cluster: Cluster, stamps: dict[TopicPartition, int], tps: list[TopicPartition],
             is_start: bool, option: str, strategy: str) -> Offsets:
    found = cluster.for_times(stamps)
    empty = [tp for tp, off in found.items() if off < 0]
    if empty and is_start and strategy == "error":
        names = ", ".join(f"{t}-{p} (timestamp {stamps[(t, p)]})" for t, p in sorted(empty))
        raise PylogOptionError(
            f"Option '{option}': no record at or after the timestamp in {names}. Set "
            "'startingOffsetsByTimestampStrategy' to 'latest' to start those partitions at "
            "their end instead.")
    latest = cluster.latest(empty)
    result = {tp: (off if off >= 0 else latest[tp]) for tp, off in found.items()}
    for tp in tps:  # partitions without a timestamp: earliest / latest
        if tp not in result:
            result[tp] = (cluster.earliest([tp]) if is_start else cluster.latest([tp]))[tp]
    return result
