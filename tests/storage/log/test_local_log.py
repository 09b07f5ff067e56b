from __future__ import annotations

import os

from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.local_log import LocalLog
from spark_log.storage.log.log_validator import validate_append
from spark_log.storage.log.segment import Segment

from ..batches import make_batch
from ..conftest import small_config


class CountingFsync(FileSystem):
    def __init__(self) -> None:
        self.fsynced: list[str] = []

    def fsync(self, fd: int) -> None:
        self.fsynced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        super().fsync(fd)


def new_local(tmp_path, clock, fs: FileSystem | None = None, **props: str  # type: ignore
              ) -> LocalLog:
    config = small_config(**props)
    fs = fs or FileSystem()
    first = Segment(str(tmp_path), 0, config, clock=clock, fs=fs, active=True, create=True)
    return LocalLog(str(tmp_path), "t-0", config, [first], next_offset=0, recovery_point=0,
                    clock=clock, fs=fs)


def append(local: LocalLog, count: int, clock) -> None:  # type: ignore[no-untyped-def]
    for _ in range(count):
        valid = validate_append(make_batch(2, value_size=60), config=local.config,
                                origin=AppendOrigin.CLIENT,
                                next_offset=local.log_end_offset, leader_epoch=0,
                                now_ms=clock.now_ms(), topic_partition="t-0")
        local.append(valid, clock.now_ms())


def test_roll_reuses_an_empty_active_segment(tmp_path, clock) -> None:  # type: ignore
    local = new_local(tmp_path, clock)
    assert local.roll(0) is local.segments.active
    append(local, 1, clock)
    rolled = local.roll(0)
    assert rolled.base_offset == 2 and len(local.segments) == 2


def test_roll_deletes_stale_files_at_the_new_offset(tmp_path, clock) -> None:  # type: ignore
    local = new_local(tmp_path, clock)
    append(local, 1, clock)
    with open(os.path.join(tmp_path, "00000000000000000002.log"), "wb") as f:
        f.write(b"stale")
    local.roll(0)
    assert local.segments.active.size == 0
    assert os.path.getsize(os.path.join(tmp_path, "00000000000000000002.log")) == 0


def test_flush_fsyncs_only_unflushed_segments(tmp_path, clock) -> None:  # type: ignore
    fs = CountingFsync()
    local = new_local(tmp_path, clock, fs)
    append(local, 45, clock)  # three segments: 0, 40, 80
    fs.fsynced.clear()
    local.flush_to(50)
    assert local.recovery_point == 50
    assert {n for n in fs.fsynced if n.endswith(".log")} == {"00000000000000000000.log",
                                                             "00000000000000000040.log"}
    fs.fsynced.clear()
    local.flush_to(90)
    assert {n for n in fs.fsynced if n.endswith(".log")} == {"00000000000000000040.log",
                                                             "00000000000000000080.log"}
    fs.fsynced.clear()
    local.flush_to(60)  # already durable
    assert fs.fsynced == [] and local.recovery_point == 90


def test_flush_due_flushes_rolled_segments(tmp_path, clock) -> None:  # type: ignore
    local = new_local(tmp_path, clock)
    append(local, 25, clock)
    assert local.recovery_point == 0
    local.flush_due(clock.monotonic_ms())
    assert local.recovery_point == local.segments.active.base_offset == 40


def test_truncate_and_truncate_fully(tmp_path, clock) -> None:  # type: ignore
    local = new_local(tmp_path, clock, **{"file.delete.delay.ms": "0"})
    append(local, 45, clock)
    local.flush_to(90)
    assert local.truncate_to(45) == 44  # the batch (44, 45) goes whole
    assert [s.base_offset for s in local.segments] == [0, 40]
    assert local.recovery_point == 44
    local.truncate_fully(500)
    assert [s.base_offset for s in local.segments] == [500]
    assert local.log_end_offset == local.recovery_point == 500
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000500.index",
                                            "00000000000000000500.log",
                                            "00000000000000000500.timeindex"]


def test_lazy_end_offset(tmp_path, clock) -> None:  # type: ignore
    local = new_local(tmp_path, clock)
    append(local, 3, clock)
    local.close()
    segment = Segment(str(tmp_path), 0, local.config, clock=clock, active=True)
    lazy = LocalLog(str(tmp_path), "t-0", local.config, [segment], next_offset=None,
                    recovery_point=100, clock=clock, fs=FileSystem())
    assert lazy.recovery_point == 100
    assert lazy.log_end_offset == 6 and lazy.recovery_point == 6
