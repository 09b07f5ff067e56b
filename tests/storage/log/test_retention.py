from __future__ import annotations

from dataclasses import dataclass

from spark_log.storage.log.retention import (
    below_log_start,
    deletable_segments,
    over_retention_bytes,
    past_retention_ms,
)


@dataclass
class FakeSegment:
    base_offset: int
    size: int
    largest: int = 0

    def largest_timestamp(self) -> int:
        return self.largest


SEGS = [FakeSegment(0, 100, 1000), FakeSegment(10, 100, 2000), FakeSegment(20, 100, 3000),
        FakeSegment(30, 50, 4000)]


def bases(segments: list) -> list[int]:  # type: ignore[type-arg]
    return [s.base_offset for s in segments]


def run(predicate, hw: int = 40, leo: int = 40) -> list[int]:  # type: ignore[no-untyped-def]
    return bases(deletable_segments(SEGS, predicate, high_watermark=lambda: hw,  # type: ignore
                                    log_end_offset=lambda: leo))


def test_below_log_start_needs_the_next_segment_to_start_at_or_below() -> None:
    assert run(below_log_start(20)) == [0, 10]
    assert run(below_log_start(19)) == [0]
    assert run(below_log_start(40)) == [0, 10, 20]  # never the last segment


def test_retention_bytes_deletes_oldest_while_over() -> None:
    assert over_retention_bytes(350, -1) is None
    assert over_retention_bytes(350, 351) is None
    assert run(over_retention_bytes(350, 200)) == [0]
    assert run(over_retention_bytes(350, 150)) == [0, 10]
    assert run(over_retention_bytes(350, 0)) == [0, 10, 20, 30]


def test_retention_ms_by_largest_timestamp_stops_at_first_young_segment() -> None:
    assert past_retention_ms(5000, -1) is None
    assert run(past_retention_ms(4000, 2000)) == [0]  # strictly older than retention.ms
    assert run(past_retention_ms(5000, 2000)) == [0, 10]
    assert run(past_retention_ms(10**9, 1)) == [0, 10, 20, 30]


def test_high_watermark_bounds_deletion() -> None:
    assert run(past_retention_ms(10**9, 1), hw=25) == [0, 10]
    assert run(past_retention_ms(10**9, 1), hw=39) == [0, 10, 20]


def test_an_empty_last_segment_is_never_deletable() -> None:
    segs = [FakeSegment(0, 100), FakeSegment(10, 0)]
    out = deletable_segments(segs, lambda s, n: True, high_watermark=lambda: 10,  # type: ignore
                             log_end_offset=lambda: 10)
    assert bases(out) == [0]
