from __future__ import annotations

import logging
import os

import pytest

from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.leader_epoch import EpochEntry, LeaderEpochCache


@pytest.fixture
def cache(tmp_path) -> LeaderEpochCache:  # type: ignore[no-untyped-def]
    return LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))


def test_assign_records_new_epochs_only(cache: LeaderEpochCache, tmp_path) -> None:  # type: ignore
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 10)]
    cache.sync_below(11)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 10\n"
    assert LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint")).entries == cache.entries


def test_conflicting_entries_are_replaced(cache: LeaderEpochCache,
                                          caplog: pytest.LogCaptureFixture) -> None:
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(3, 20)
    with caplog.at_level(logging.WARNING):
        cache.assign(3, 15)  # epoch 3 really started earlier
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15)]
    cache.assign(2, 12)  # an older epoch restarting drops everything after it
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 12)]
    assert "caused truncation" in caplog.text


def test_invalid_entries_are_rejected(cache: LeaderEpochCache) -> None:
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_epoch_for_offset_and_end_offset_for(cache: LeaderEpochCache) -> None:
    cache.assign(1, 10)
    cache.assign(4, 30)
    assert cache.epoch_for_offset(5) is None
    assert cache.epoch_for_offset(10) == 1
    assert cache.epoch_for_offset(29) == 1
    assert cache.epoch_for_offset(100) == 4
    assert cache.end_offset_for(4, 77) == (4, 77)
    assert cache.end_offset_for(1, 77) == (1, 30)
    assert cache.end_offset_for(2, 77) == (1, 30)
    assert cache.end_offset_for(0, 77) == (0, 10)
    assert cache.end_offset_for(9, 77) == (-1, -1)
    assert cache.end_offset_for(-1, 77) == (-1, -1)


def test_truncation_from_both_ends(cache: LeaderEpochCache) -> None:
    for epoch, start in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(25)
    assert cache.latest_epoch() == 2
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(1, 15), EpochEntry(2, 20)]
    assert cache.earliest_entry() == EpochEntry(1, 15)
    cache.clear()
    assert cache.latest_epoch() is None


@pytest.mark.parametrize("text", ["0\n1\nnot numbers\n", "0\n2\n3 10\n2 20\n", "0\n1\n-1 5\n",
                                  "\x00" * 16])
def test_a_damaged_file_is_flagged_for_a_rebuild(tmp_path, text) -> None:  # type: ignore
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    cache = LeaderEpochCache(str(path))
    assert cache.entries == [] and cache.damaged
    assert cache.problem is not None and str(path) in cache.problem
    cache.rebuild([(0, 0), (0, 5), (2, 9), (1, 12), (4, 20)])
    assert cache.entries == [(0, 0), (2, 9), (4, 20)] and not cache.damaged
    assert LeaderEpochCache(str(path)).entries == cache.entries


def test_a_partition_rebuilds_a_damaged_checkpoint_from_its_batches(tmp_path, caplog) -> None:  # type: ignore
    from spark_log.clock import ManualClock

    from ..batches import make_batch
    from ..conftest import open_log, small_config

    clock = ManualClock(1_700_000_000_000)
    log = open_log(tmp_path, small_config(), clock)
    for epoch in (0, 0, 3, 3, 5):
        log.append(make_batch(2, value_size=300), leader_epoch=epoch)
    expected = log.leader_epoch_cache.entries
    assert expected == [(0, 0), (3, 4), (5, 8)]
    log.close()
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    checkpoint.write_bytes(b"\x00garbage")
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, small_config(), clock, had_clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == expected
    assert LeaderEpochCache(str(checkpoint)).entries == expected  # written back
    assert "rebuilding it from the log" in caplog.text


class SyncCounting(FileSystem):
    def __init__(self) -> None:
        self.synced: list[str] = []

    def fsync(self, fd: int) -> None:  # files and directories alike
        self.synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        super().fsync(fd)


def test_truncation_by_recovery_is_written_without_fsync(tmp_path) -> None:  # type: ignore
    # Each start after a crash truncates again, so it need not wait for the disk (Kafka's
    # truncateFromEndAsyncFlush); assignments still do, once the log flushes past them.
    fs = SyncCounting()
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path, fs)
    cache.assign(3, 0)
    cache.assign(4, 20)
    cache.sync_below(21)
    synced = len(fs.synced)
    assert synced > 0
    cache.truncate_from_end(20, sync=False)
    assert len(fs.synced) == synced and LeaderEpochCache(path).entries == [EpochEntry(3, 0)]


def test_an_entry_is_made_durable_once_the_log_flushes_past_its_start(tmp_path) -> None:  # type: ignore
    fs = SyncCounting()
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(path, fs)
    cache.assign(0, 0)
    cache.sync_below(5)
    assert LeaderEpochCache(path).entries == [EpochEntry(0, 0)]
    assert sorted(fs.synced) == sorted([path + ".tmp", str(tmp_path)])
    assert cache.assign(5, 10)  # a leadership at the log end: nothing below it to flush
    cache.sync_below(10)
    assert LeaderEpochCache(path).entries == [EpochEntry(0, 0)] and len(fs.synced) == 2
    cache.sync_below(11)  # its first batch is about to be fsynced
    assert LeaderEpochCache(path).entries == [EpochEntry(0, 0), EpochEntry(5, 10)]
    assert len(fs.synced) == 4
    cache.sync_below(1000)  # nothing owed any more
    assert len(fs.synced) == 4


def test_a_partition_writes_its_epochs_before_its_recovery_point_passes_them(tmp_path) -> None:  # type: ignore
    from spark_log.clock import ManualClock

    from ..batches import make_batch
    from ..conftest import open_log, small_config

    clock = ManualClock(1_700_000_000_000)
    log = open_log(tmp_path, small_config(), clock)
    checkpoint = str(tmp_path / "t-0" / "leader-epoch-checkpoint")
    for epoch in (3, 3, 5):
        log.append(make_batch(2), leader_epoch=epoch)
    assert LeaderEpochCache(checkpoint).entries == []  # only the unflushed batches have them
    log.flush()
    assert log.recovery_point == 6
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (5, 4)]
    log.leader_epoch_cache.assign(7, 6)  # a leadership taken at the log end
    log.flush()
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (5, 4)]  # nothing at 6 to flush
    log.append(make_batch(1), leader_epoch=7)
    log.close()
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (5, 4), (7, 6)]
    reopened = open_log(tmp_path, small_config(), clock, had_clean_shutdown=True,
                        recovery_point=7)
    assert reopened.leader_epoch_cache.entries == [(3, 0), (5, 4), (7, 6)]


def test_the_epochs_of_unflushed_batches_are_rebuilt_after_a_crash(tmp_path) -> None:  # type: ignore
    from spark_log.clock import ManualClock

    from ..batches import make_batch
    from ..conftest import open_log, small_config

    clock = ManualClock(1_700_000_000_000)
    log = open_log(tmp_path, small_config(), clock)
    for epoch in (3, 3, 5, 8):
        log.append(make_batch(2), leader_epoch=epoch)
    log.flush(4)  # the recovery point passes epoch 3's batches only
    checkpoint = str(tmp_path / "t-0" / "leader-epoch-checkpoint")
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (5, 4), (8, 6)]
    log.leader_epoch_cache.assign(9, 8)
    log.append(make_batch(2), leader_epoch=9)
    # A crash: nothing closed or flushed; a new process opens the files from the recovery point.
    crashed = open_log(tmp_path, small_config(), clock, recovery_point=log.recovery_point)
    assert crashed.leader_epoch_cache.entries == [(3, 0), (5, 4), (8, 6), (9, 8)]
    assert crashed.log_end_offset == 10
    log.release()
