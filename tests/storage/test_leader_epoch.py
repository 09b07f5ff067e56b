from __future__ import annotations

import logging

import pytest

from spark_log.storage.leader_epoch import EpochEntry, LeaderEpochCache


@pytest.fixture
def cache(tmp_path) -> LeaderEpochCache:  # type: ignore[no-untyped-def]
    return LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))


def test_assign_records_new_epochs_only(cache: LeaderEpochCache, tmp_path) -> None:  # type: ignore
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 10)]
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


def test_corrupt_file_is_ignored_with_a_warning(tmp_path, caplog) -> None:  # type: ignore
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\nnot numbers\n")
    with caplog.at_level(logging.WARNING):
        assert LeaderEpochCache(str(path)).entries == []
    assert "corrupt leader epoch checkpoint" in caplog.text
