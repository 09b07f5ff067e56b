from __future__ import annotations

import os

from spark_log.records.batch_header import read_header
from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.log.segment import Segment
from spark_log.storage.log.segment_deleter import SegmentDeleter

from ..batches import make_batch
from ..conftest import small_config


def make(tmp_path, clock, base: int) -> Segment:  # type: ignore[no-untyped-def]
    s = Segment(str(tmp_path), base, small_config(), clock=clock, active=True, create=True)
    b = make_batch(1, base_offset=base)
    s.append([b], [read_header(b)])
    return s


def test_rename_now_remove_after_the_delay(tmp_path, clock) -> None:  # type: ignore
    deleter = SegmentDeleter(str(tmp_path), DEFAULT_FS, clock)
    segment = make(tmp_path, clock, 0)
    reader = segment.read(0, 1000)
    deleter.delete([segment], delay_ms=60_000)
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index.deleted",
                                            "00000000000000000000.log.deleted",
                                            "00000000000000000000.timeindex.deleted"]
    assert deleter.pending == [segment]
    assert deleter.delete_due(clock.monotonic_ms() + 59_999) == 0
    clock.advance(60_000)
    assert deleter.delete_due(clock.monotonic_ms()) == 1
    assert os.listdir(tmp_path) == [] and deleter.pending == []
    assert reader.read_bytes() == make_batch(1)  # a fetch in flight still reads its slice


def test_zero_delay_removes_at_once(tmp_path, clock) -> None:  # type: ignore
    deleter = SegmentDeleter(str(tmp_path), DEFAULT_FS, clock)
    deleter.delete([make(tmp_path, clock, 0), make(tmp_path, clock, 1)], delay_ms=0)
    assert os.listdir(tmp_path) == []


def test_release_leaves_files_for_the_loader(tmp_path, clock) -> None:  # type: ignore
    deleter = SegmentDeleter(str(tmp_path), DEFAULT_FS, clock)
    deleter.delete([make(tmp_path, clock, 0)], delay_ms=1000)
    deleter.release()
    assert deleter.pending == [] and len(os.listdir(tmp_path)) == 3
