from __future__ import annotations

import pytest

from spark_log.storage.log.log_segments import LogSegments
from spark_log.storage.log.segment import Segment

from ..conftest import small_config


@pytest.fixture
def segments(tmp_path, clock) -> LogSegments:  # type: ignore[no-untyped-def]
    return LogSegments([Segment(str(tmp_path), b, small_config(), clock=clock, create=True)
                        for b in (200, 0, 100)])


def test_sorted_with_the_last_active(segments: LogSegments) -> None:
    assert [s.base_offset for s in segments] == [0, 100, 200]
    assert segments.first.base_offset == 0 and segments.active.base_offset == 200
    assert len(segments) == 3 and segments


def test_floor_and_higher(segments: LogSegments) -> None:
    assert segments.floor(-1) is None
    assert segments.floor(0).base_offset == 0  # type: ignore[union-attr]
    assert segments.floor(150).base_offset == 100  # type: ignore[union-attr]
    assert segments.floor(10**9).base_offset == 200  # type: ignore[union-attr]
    assert segments.higher(100).base_offset == 200  # type: ignore[union-attr]
    assert segments.higher(200) is None


def test_overlapping_starts_at_the_floor(segments: LogSegments) -> None:
    assert [s.base_offset for s in segments.overlapping(150, 250)] == [100, 200]
    assert [s.base_offset for s in segments.overlapping(0, 100)] == [0]
    assert [s.base_offset for s in segments.overlapping(100, 101)] == [100]


def test_add_and_remove(segments: LogSegments, tmp_path, clock) -> None:  # type: ignore
    extra = Segment(str(tmp_path), 50, small_config(), clock=clock, create=True)
    segments.add(extra)
    assert [s.base_offset for s in segments] == [0, 50, 100, 200]
    with pytest.raises(ValueError, match="already exists"):
        segments.add(extra)
    segments.remove(extra)
    assert [s.base_offset for s in segments] == [0, 100, 200]
    assert segments.size_bytes() == 0
