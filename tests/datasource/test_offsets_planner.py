"""Pure parts: Spark's offset JSON, range splitting, admission control, filter bounds."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from spark_log.datasource.filters import push
from spark_log.datasource.offsets import offsets_from_json, offsets_to_json
from spark_log.datasource.planner import (
    OffsetRange,
    admit,
    should_wait,
    split_ranges,
    total_backlog,
)


def test_offset_json_round_trips_in_sparks_shape() -> None:
    offsets = {("b", 1): 5, ("a", 10): 7, ("a", 2): 3}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["a"]) == ["2", "10"]
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"a":{"0":1}}') == {("a", 0): 1}


def test_one_task_per_partition_by_default() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 3)]
    assert split_ranges(ranges) == [OffsetRange("t", 0, 0, 100), OffsetRange("t", 2, 0, 3)]


def test_min_partitions_splits_one_partition_evenly() -> None:
    tasks = split_ranges([OffsetRange("t", 0, 0, 1000)], min_partitions=8)
    assert len(tasks) == 8
    assert [t.size for t in tasks] == [125] * 8
    assert tasks[0].start == 0 and tasks[-1].end == 1000


def test_min_partitions_splits_in_proportion_to_size() -> None:
    tasks = split_ranges([OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 0, 100)],
                         min_partitions=4)
    assert [(t.partition, t.size) for t in tasks] == [(0, 100), (0, 100), (0, 100), (1, 100)]


def test_min_partitions_below_the_partition_count_changes_nothing() -> None:
    ranges = [OffsetRange("t", p, 0, 10) for p in range(4)]
    assert split_ranges(ranges, min_partitions=2) == ranges


def test_max_records_per_partition_caps_tasks() -> None:
    tasks = split_ranges([OffsetRange("t", 0, 0, 1001)], max_records=250)
    assert len(tasks) == 5 and max(t.size for t in tasks) <= 250


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=6),
       st.one_of(st.none(), st.integers(1, 40)), st.one_of(st.none(), st.integers(1, 500)))
def test_splitting_preserves_the_union_of_offsets(spans: list[tuple[int, int]],
                                                  min_parts: int | None,
                                                  max_records: int | None) -> None:
    ranges = [OffsetRange("t", i, min(a, b), max(a, b)) for i, (a, b) in enumerate(spans)]
    tasks = split_ranges(ranges, min_parts, max_records)
    want = sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    got = sorted((t.partition, o) for t in tasks for o in range(t.start, t.end))
    assert got == want
    assert all(t.size > 0 for t in tasks)
    if max_records is not None:
        assert all(t.size <= max_records for t in tasks)


def test_admission_is_proportional_to_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 9000, ("t", 1): 1000}
    assert admit(start, latest, max_offsets=1000) == {("t", 0): 900, ("t", 1): 100}


def test_admission_starves_no_partition() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 1_000_000, ("t", 1): 1}
    end = admit(start, latest, max_offsets=100)
    assert end[("t", 1)] == 1
    assert end[("t", 0)] >= 98


def test_admission_without_backlog_returns_start() -> None:
    start = {("t", 0): 5}
    assert admit(start, {("t", 0): 5}, max_offsets=10) == {("t", 0): 5}


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1,
                max_size=8), st.integers(1, 5000))
def test_admission_stays_within_bounds_and_limit(spans: list[tuple[int, int]],
                                                 limit: int) -> None:
    start = {("t", i): min(a, b) for i, (a, b) in enumerate(spans)}
    latest = {("t", i): max(a, b) for i, (a, b) in enumerate(spans)}
    end = admit(start, latest, max_offsets=limit)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    backlogged = [tp for tp in latest if latest[tp] > start[tp]]
    assert all(end[tp] > start[tp] for tp in backlogged)  # nobody starves
    taken = sum(end[tp] - start[tp] for tp in latest)
    assert taken <= max(limit, len(backlogged))


def test_max_bytes_uses_record_sizes() -> None:
    start = {("t", 0): 0}
    end = admit(start, {("t", 0): 10_000}, max_bytes=100_000,
                bytes_per_offset={("t", 0): 100.0})
    assert end == {("t", 0): 1000}


def test_min_offsets_waits_until_max_trigger_delay() -> None:
    assert should_wait(5, 10, last_trigger_ms=0, now_ms=1000, max_delay_ms=5000)
    assert not should_wait(5, 10, last_trigger_ms=0, now_ms=6000, max_delay_ms=5000)
    assert not should_wait(10, 10, last_trigger_ms=0, now_ms=1000, max_delay_ms=5000)
    assert not should_wait(0, None, last_trigger_ms=0, now_ms=0, max_delay_ms=5000)
    assert total_backlog({("t", 0): 3}, {("t", 0): 10, ("t", 1): 4}) == 7


def test_filters_become_bounds() -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    day = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    filters = [EqualTo(("partition",), 1), GreaterThanOrEqual(("offset",), 10),
               LessThan(("offset",), 20), GreaterThanOrEqual(("timestamp",), day),
               In(("topic",), ("a", "b")), EqualTo(("value",), b"x")]
    bounds, remaining = push(filters)
    assert bounds.partitions == frozenset({1}) and bounds.topics == frozenset({"a", "b"})
    assert (bounds.offset_low, bounds.offset_high) == (10, 20)
    assert bounds.ts_low_ms == int(day.timestamp() * 1000)
    # Timestamp filters are re-checked by Spark; value filters are not ours.
    assert remaining == [filters[3], filters[5]]
    assert bounds.cut(OffsetRange("a", 1, 0, 100)) == OffsetRange("a", 1, 10, 20)
    assert bounds.keeps("a", 1) and not bounds.keeps("a", 0) and not bounds.keeps("c", 1)
