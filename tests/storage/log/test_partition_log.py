from __future__ import annotations

import os

import pytest

from spark_log.records.batch_header import iter_headers, read_header, verify_crc
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from spark_log.storage.log.leader_epoch import EpochEntry
from spark_log.storage.log.log_dir_failure import LogDirFailure
from spark_log.storage.log.partition_log import PartitionLog, delete_dir_name

from ..batches import DEFAULT_TS, make_batch
from ..conftest import FaultyFileSystem, open_log, small_config

DAY = 86_400_000


@pytest.fixture
def log(tmp_path, clock, config) -> PartitionLog:  # type: ignore[no-untyped-def]
    return open_log(tmp_path, config, clock)


def append_many(log: PartitionLog, count: int, records: int = 2, value_size: int = 60,
                ts: int | None = None, epoch: int = 0) -> None:
    for i in range(count):
        stamp = (log.clock.now_ms() if ts is None else ts) + i
        log.append(make_batch(records, timestamp=stamp, value_size=value_size),
                   leader_epoch=epoch)


def test_appends_get_consecutive_offsets(log: PartitionLog) -> None:
    infos = [log.append(make_batch(n), leader_epoch=0) for n in (1, 3, 2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 3), (4, 5)]
    assert log.log_end_offset == 6
    assert infos[1].record_count == 3 and infos[1].batch_count == 1
    data = log.read(0, 10**6).read_bytes()
    assert [h.base_offset for _, h in iter_headers(data)] == [0, 1, 4]
    for pos, h in iter_headers(data):
        verify_crc(data, pos, h)


def test_rolls_when_the_segment_is_full(log: PartitionLog) -> None:
    append_many(log, 60)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) == 3 and bases[0] == 0
    assert all(s.size <= 4096 for s in log.segments)
    assert log.read(bases[1], 100).read_bytes()[:8] == bases[1].to_bytes(8, "big")


def test_rolls_by_age_of_the_first_batch(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"segment.ms": "60000"}), clock)
    log.append(make_batch(1, timestamp=DEFAULT_TS), leader_epoch=0)
    log.append(make_batch(1, timestamp=DEFAULT_TS + 60_000), leader_epoch=0)
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=DEFAULT_TS + 60_001), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_read_inside_a_batch_returns_that_batch(log: PartitionLog) -> None:
    log.append(make_batch(5), leader_epoch=0)
    log.append(make_batch(5), leader_epoch=0)
    assert read_header(log.read(7, 1).read_bytes()).base_offset == 5


def test_reads_outside_the_log_are_out_of_range(log: PartitionLog) -> None:
    append_many(log, 60)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(50)
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 49 .* range 50 to 120"):
        log.read(49, 100)
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 121 .* range 50 to 120"):
        log.read(121, 100)
    assert log.read(120, 100).size == 0
    assert read_header(log.read(50, 1).read_bytes()).base_offset == 50


def test_max_offset_bounds_the_read(log: PartitionLog) -> None:
    append_many(log, 5)
    data = log.read(0, 10**6, max_offset=6).read_bytes()
    assert [h.base_offset for _, h in iter_headers(data)] == [0, 2, 4]
    assert log.read(6, 10**6, max_offset=6).size == 0


def test_an_invalid_append_writes_nothing(log: PartitionLog) -> None:
    log.append(make_batch(1), leader_epoch=0)
    size = os.path.getsize(log.segments[0].log.path)
    bad = bytearray(make_batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad), leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        log.append(make_batch(1) + make_batch(1), leader_epoch=0)
    assert log.log_end_offset == 1 and os.path.getsize(log.segments[0].log.path) == size


def test_log_append_time_topic(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"message.timestamp.type": "LogAppendTime"}), clock)
    info = log.append(make_batch(2, timestamp=5), leader_epoch=0)
    assert info.log_append_time == clock.now_ms()
    assert read_header(log.read(0, 100).read_bytes()).max_timestamp == clock.now_ms()


def test_leader_epochs_are_recorded(tmp_path, log: PartitionLog, clock, config) -> None:  # type: ignore
    append_many(log, 2, epoch=3)
    append_many(log, 2, epoch=5)
    assert log.leader_epoch_cache.entries == [EpochEntry(3, 0), EpochEntry(5, 4)]
    assert read_header(log.read(4, 1).read_bytes()).partition_leader_epoch == 5
    log.close()
    assert open_log(tmp_path, config, clock).leader_epoch_cache.latest_epoch() == 5


def test_high_watermark_stays_within_the_log(log: PartitionLog) -> None:
    append_many(log, 3)
    assert log.high_watermark == 0
    assert log.update_high_watermark(100) == 6
    assert log.update_high_watermark(-5) == 0


def test_delete_records_moves_the_log_start_and_drops_old_segments(log: PartitionLog) -> None:
    append_many(log, 60)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark 0"):
        log.delete_records_before(10)
    log.update_high_watermark(100)
    second = log.segments[1].base_offset
    assert log.delete_records_before(second + 1) == second + 1
    assert log.segments[0].base_offset == second
    assert log.delete_records_before(5) == second + 1  # never moves back
    assert log.delete_records_before(-1) == 100
    assert log.list_offset(-2).offset == 100


def test_truncate_to(log: PartitionLog) -> None:
    append_many(log, 60, epoch=1)
    log.update_high_watermark(120)
    assert not log.truncate_to(120)
    assert log.truncate_to(30)
    assert log.log_end_offset == 30 and log.high_watermark == 30
    assert len(log.segments) == 1
    log.append(make_batch(1), leader_epoch=2)
    assert log.log_end_offset == 31
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, 30)]


def test_truncate_fully_and_replication_appends(log: PartitionLog) -> None:
    append_many(log, 3)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    records = make_batch(2, base_offset=1000, leader_epoch=9) + make_batch(1, base_offset=1005,
                                                                          leader_epoch=9)
    info = log.append(records, leader_epoch=-1, origin=AppendOrigin.REPLICATION)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (1000, 1005, 1006)
    assert log.read(1002, 100).read_bytes() == records[len(make_batch(2)):]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append(make_batch(1, base_offset=1003), leader_epoch=-1,
                   origin=AppendOrigin.REPLICATION)
    assert log.leader_epoch_cache.entries == [EpochEntry(9, 1000)]


def test_retention_by_time(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"retention.ms": str(DAY)}), clock)
    append_many(log, 40)  # two full segments and some
    clock.advance(DAY // 2)
    append_many(log, 40)
    log.update_high_watermark(log.log_end_offset)
    second = log.segments[1]  # the first two segments were written a day ago
    clock.advance(second.largest_timestamp() + DAY - clock.now_ms())
    assert log.delete_old_segments() == 1  # `second` is exactly retention.ms old: kept
    assert log.segments[0] is second
    clock.advance(1)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == log.segments[0].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    clock.advance(DAY)
    log.delete_old_segments()  # everything expired: a fresh empty segment remains
    assert [s.size for s in log.segments] == [0]
    assert log.log_start_offset == log.log_end_offset == 160


def test_retention_by_size(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"retention.bytes": "8000"}), clock)
    append_many(log, 100)
    log.update_high_watermark(log.log_end_offset)
    assert log.size_bytes > 8000
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.size_bytes >= 8000
    assert log.size_bytes - log.segments[0].size < 8000  # one more would go below


def test_retention_waits_for_the_high_watermark(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"retention.ms": "1"}), clock)
    append_many(log, 100)
    clock.advance(DAY)
    assert log.delete_old_segments() == 0
    log.update_high_watermark(log.segments[2].base_offset)
    assert log.delete_old_segments() == 2


def test_compacted_topic_keeps_segments(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"retention.ms": "1", "cleanup.policy": "compact"}),
                   clock)
    append_many(log, 100)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(DAY)
    assert log.delete_old_segments() == 0


def test_slice_survives_retention(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"retention.ms": "1",
                                             "file.delete.delay.ms": "0"}), clock)
    append_many(log, 60)
    in_flight = log.read(0, 10**6)
    expected = in_flight.read_bytes()
    log.update_high_watermark(log.log_end_offset)
    clock.advance(DAY)
    assert log.delete_old_segments() >= 1
    assert not os.path.exists(os.path.join(log.dir, "00000000000000000000.log"))
    assert in_flight.read_bytes() == expected


def test_flush_messages_advances_the_recovery_point(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"flush.messages": "4"}), clock)
    log.append(make_batch(3), leader_epoch=0)
    assert log.recovery_point == 0
    log.append(make_batch(1), leader_epoch=0)
    assert log.recovery_point == 4


def test_flush_ms_and_roll_flush_happen_in_flush_due(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(**{"flush.ms": "1000"}), clock)
    append_many(log, 30)  # rolled once
    log.flush_due()
    assert log.recovery_point == log.segments[-1].base_offset
    clock.advance(1000)
    log.flush_due()
    assert log.recovery_point == log.log_end_offset


def test_fsync_failure_makes_the_log_fail_stop(tmp_path, clock) -> None:  # type: ignore
    fs = FaultyFileSystem("fsync")
    log = open_log(tmp_path, small_config(), clock, fs=fs)
    log.append(make_batch(1), leader_epoch=0)
    fs.armed = True
    with pytest.raises(KafkaStorageError, match="injected fsync failure"):
        log.flush()
    fs.armed = False  # the disk "recovers": the log must not
    for op in (lambda: log.append(make_batch(1), leader_epoch=0), lambda: log.read(0, 10),
               log.flush, lambda: log.list_offset(-1), lambda: log.delete_old_segments()):
        with pytest.raises(KafkaStorageError, match="offline"):
            op()
    assert fs.failures == 1 and log.failed
    log.close()  # only releases files


def test_write_failure_fails_every_log_of_the_directory(tmp_path, clock) -> None:  # type: ignore
    fs = FaultyFileSystem("write")
    failure = LogDirFailure(str(tmp_path))
    a = PartitionLog(str(tmp_path), "a", 0, small_config(), clock=clock, fs=fs, failure=failure)
    b = PartitionLog(str(tmp_path), "b", 0, small_config(), clock=clock, fs=fs, failure=failure)
    fs.armed = True
    with pytest.raises(KafkaStorageError, match="appending to a-0"):
        a.append(make_batch(1), leader_epoch=0)
    with pytest.raises(KafkaStorageError):
        b.read(0, 10)


def test_reopen_after_clean_close(tmp_path, log: PartitionLog, clock, config) -> None:  # type: ignore
    append_many(log, 50)
    data = log.read(0, 10**6).read_bytes()
    log.close()
    again = open_log(tmp_path, config, clock, had_clean_shutdown=True, recovery_point=100)
    assert again.log_end_offset == 100
    assert again.read(0, 10**6).read_bytes() == data
    again.append(make_batch(1), leader_epoch=0)
    assert again.log_end_offset == 101


def test_delete_removes_the_directory(tmp_path, log: PartitionLog) -> None:  # type: ignore
    append_many(log, 3)
    log.delete()
    assert os.listdir(tmp_path) == []


def test_delete_dir_name_fits_255_bytes() -> None:
    name = delete_dir_name("x" * 249, 12)
    assert len(name) == 255 and name.endswith("-delete") and "-12." in name
    assert delete_dir_name("t", 0).startswith("t-0.")


def test_a_failure_while_opening_is_a_storage_error(tmp_path, clock) -> None:  # type: ignore
    fs = FaultyFileSystem("fsync")
    fs.armed = True
    with pytest.raises(KafkaStorageError, match=r"opening t-0: \[Errno 5\]"):
        open_log(tmp_path, small_config(), clock, fs=fs)
