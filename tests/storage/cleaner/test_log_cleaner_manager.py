"""Which log the cleaner picks and how far it cleans: dirty ratio, compaction lags, the last
stable offset, the cleaner checkpoint — with a ManualClock."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from spark_log.storage.cleaner.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from spark_log.storage.cleaner.log_cleaner import InlineDriver, LogCleaner
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

from ..batches import DEFAULT_TS
from ..cleaner_support import clean, compact_config, read_all, updates_over, write_updates

HOUR_MS = 3_600_000


@pytest.fixture
def manager(tmp_path, clock) -> Iterator[LogManager]:  # type: ignore[no-untyped-def]
    logs = LogManager(str(tmp_path), default_config=compact_config(), clock=clock)
    yield logs
    logs.close()


def cleaner_for(manager: LogManager, **options: object) -> LogCleaner:
    return LogCleaner(manager, driver=InlineDriver(), **options)  # type: ignore[arg-type]


def fill(log: PartitionLog, count: int = 300, keys: int = 10, **options: object) -> None:
    write_updates(log, updates_over(keys=keys, count=count), **options)  # type: ignore[arg-type]
    log.roll()


def test_the_dirtiest_log_is_cleaned_first(manager) -> None:  # type: ignore
    calm, filthy = manager.get_or_create("calm", 0), manager.get_or_create("filthy", 0)
    fill(calm, count=300, keys=250)  # few duplicates: cleaning would win little
    fill(filthy, count=300, keys=3)
    cleaner = cleaner_for(manager)
    # Both start all dirty (ratio 1); once cleaned, only new data is dirty.
    clean(cleaner)
    clean(cleaner)
    fill(calm, count=100, keys=250)
    fill(filthy, count=300, keys=3)
    candidate = cleaner.manager.grab_filthiest(DEFAULT_TS)
    assert candidate is not None and candidate.tp == ("filthy", 0)
    assert candidate.cleanable_ratio > 0.5


def test_a_log_below_min_cleanable_dirty_ratio_is_left_alone(manager) -> None:  # type: ignore
    manager.update_config("t", compact_config(**{"min.cleanable.dirty.ratio": "0.9"}))
    log = manager.get_or_create("t", 0)
    fill(log, count=300, keys=10)
    cleaner = cleaner_for(manager)
    assert clean(cleaner) is not None  # all dirty: ratio 1 > 0.9
    fill(log, count=30, keys=10)  # a little dirty data on a clean section
    assert clean(cleaner) is None
    assert 0 < cleaner.manager.dirtiest_ratio <= 0.9


def test_min_compaction_lag_keeps_young_segments_dirty(manager, clock) -> None:  # type: ignore
    manager.update_config("t", compact_config(**{"min.compaction.lag.ms": str(HOUR_MS)}))
    log = manager.get_or_create("t", 0)
    now = clock.now_ms()
    write_updates(log, updates_over(keys=5, count=200), timestamp=now - 2 * HOUR_MS)
    log.roll()
    young_base = log.log_end_offset
    write_updates(log, updates_over(keys=5, count=200), timestamp=now - 1000)
    log.roll()
    cleaner = cleaner_for(manager)
    assert clean(cleaner) is not None
    assert cleaner.manager.checkpoint(("t", 0)) == young_base
    young = [r for r in read_all(log).records if r.offset >= young_base]
    assert len(young) == 200  # untouched
    clock.advance(HOUR_MS)
    assert clean(cleaner) is not None
    assert len([r for r in read_all(log).records if r.offset >= young_base]) == 5


def test_max_compaction_lag_cleans_a_log_below_its_dirty_ratio(manager, clock) -> None:  # type: ignore
    manager.update_config("t", compact_config(**{"min.cleanable.dirty.ratio": "0.99",
                                                  "max.compaction.lag.ms": str(HOUR_MS)}))
    log = manager.get_or_create("t", 0)
    fill(log, count=200, keys=200)  # no duplicates
    cleaner = cleaner_for(manager)
    clean(cleaner)
    fill(log, count=20, keys=200)
    assert clean(cleaner) is None  # dirty ratio ~0.1, and not overdue yet
    clock.advance(HOUR_MS + 1)
    assert clean(cleaner) is not None
    assert cleaner.manager.checkpoint(("t", 0)) == log.segments[-1].base_offset


def test_cleaning_stops_at_the_last_stable_offset(manager) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    fill(log, count=600, keys=10)
    bases = [s.base_offset for s in log.segments]
    stable = bases[3] + 2  # inside the fourth segment
    cleaner = cleaner_for(manager, last_stable_offset=lambda _log: stable)
    clean(cleaner)
    assert cleaner.manager.checkpoint(("t", 0)) == bases[3]
    assert len([r for r in read_all(log).records if r.offset >= bases[3]]) == 600 - bases[3]


def test_the_checkpoint_file_is_kafkas_format_and_is_honoured_on_restart(tmp_path, clock) -> None:  # type: ignore
    logs = LogManager(str(tmp_path), default_config=compact_config(), clock=clock)
    log = logs.get_or_create("t", 0)
    fill(log)
    clean(cleaner_for(logs))
    end = log.segments[-1].base_offset
    path = os.path.join(str(tmp_path), CLEANER_OFFSET_CHECKPOINT)
    with open(path) as f:
        assert f.read() == f"0\n1\nt 0 {end}\n"
    logs.close()
    reopened = LogManager(str(tmp_path), default_config=compact_config(), clock=clock)
    cleaner = cleaner_for(reopened)
    assert cleaner.manager.checkpoint(("t", 0)) == end
    assert clean(cleaner) is None  # nothing dirty since
    reopened.close()


def test_a_checkpoint_past_the_log_end_is_reset_to_the_log_start(manager, caplog) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    fill(log)
    cleaner = cleaner_for(manager)
    cleaner.manager.update_checkpoint(log, 10_000)
    with caplog.at_level(logging.WARNING):
        assert clean(cleaner) is not None
    assert "resetting the first dirty offset" in caplog.text
    assert cleaner.manager.checkpoint(("t", 0)) == log.segments[-1].base_offset
    assert len(read_all(log).records) == 10


def test_a_recreated_partition_does_not_inherit_the_old_checkpoint(manager) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    fill(log)
    cleaner = cleaner_for(manager)
    clean(cleaner)
    assert cleaner.manager.checkpoint(("t", 0)) is not None
    manager.delete("t", 0)
    manager.get_or_create("t", 0)
    assert cleaner.manager.checkpoint(("t", 0)) is None
    with open(os.path.join(manager.data_dir, CLEANER_OFFSET_CHECKPOINT)) as f:
        assert f.read() == "0\n1\nt 0 %d\n" % log.segments[-1].base_offset  # noqa: UP031
    cleaner.manager.update_checkpoint(manager.get("t", 0), 0)  # type: ignore[arg-type]
    with open(os.path.join(manager.data_dir, CLEANER_OFFSET_CHECKPOINT)) as f:
        assert f.read() == "0\n1\nt 0 0\n"


def test_delete_only_topics_are_never_cleaned(manager) -> None:  # type: ignore
    manager.update_config("plain", compact_config(**{"cleanup.policy": "delete"}))
    fill(manager.get_or_create("plain", 0))
    assert clean(cleaner_for(manager)) is None
    assert len(read_all(manager.get("plain", 0)).records) == 300
