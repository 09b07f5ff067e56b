from __future__ import annotations

import pytest

from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.timestamp_search import TimestampAndOffset

from ..batches import DEFAULT_TS, make_batch
from ..conftest import open_log, small_config


@pytest.fixture
def log(tmp_path, clock) -> PartitionLog:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, small_config(), clock)
    # 60 batches of 2 records over 3 segments; batch i has timestamp DEFAULT_TS + 10 * i,
    # except batch 30 which carries the largest timestamp of all
    for i in range(60):
        ts = DEFAULT_TS + 10 * i if i != 30 else DEFAULT_TS + 10**6
        log.append(make_batch(2, timestamp=ts, value_size=60), leader_epoch=i // 20)
    return log


def test_special_timestamps(log: PartitionLog) -> None:
    assert log.list_offset(-2) == TimestampAndOffset(-1, 0, 0)
    assert log.list_offset(-4) == TimestampAndOffset(-1, 0, 0)
    assert log.list_offset(-1) == TimestampAndOffset(-1, 120, 2)
    assert log.list_offset(-5) == TimestampAndOffset(-1, -1, -1)
    assert log.list_offset(-3) == TimestampAndOffset(DEFAULT_TS + 10**6, 60, 1)
    with pytest.raises(ValueError):
        log.list_offset(-7)


def test_search_by_timestamp(log: PartitionLog) -> None:
    assert log.list_offset(0) == TimestampAndOffset(DEFAULT_TS, 0, 0)
    assert log.offset_for_timestamp(DEFAULT_TS + 55) == TimestampAndOffset(DEFAULT_TS + 60, 12, 0)
    assert log.offset_for_timestamp(DEFAULT_TS + 300) == \
        TimestampAndOffset(DEFAULT_TS + 10**6, 60, 1)  # batch 30 is the first at or after
    assert log.offset_for_timestamp(DEFAULT_TS + 10**6 + 1) is None


def test_search_starts_at_the_log_start_offset(log: PartitionLog) -> None:
    log.update_high_watermark(120)
    log.delete_records_before(13)
    assert log.offset_for_timestamp(0) == TimestampAndOffset(DEFAULT_TS + 60, 13, 0)
    assert log.list_offset(-2) == TimestampAndOffset(-1, 13, 0)


def test_empty_log(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(), clock)
    assert log.list_offset(-3) is None
    assert log.list_offset(-2) == TimestampAndOffset(-1, 0, None)
    assert log.offset_for_timestamp(0) is None
