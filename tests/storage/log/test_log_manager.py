from __future__ import annotations

import logging
import os
import shutil

import pytest

from spark_log.storage.errors import KafkaStorageError
from spark_log.storage.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, parse_partition_dir

from ..batches import make_batch
from ..conftest import CountingFileSystem, FaultyFileSystem, small_config


def manager(data_dir, clock, **kw) -> LogManager:  # type: ignore[no-untyped-def]
    return LogManager(str(data_dir), default_config=small_config(), clock=clock, **kw)


def fill(m: LogManager, topic: str, partition: int, batches: int) -> None:
    log = m.get_or_create(topic, partition)
    for _ in range(batches):
        log.append(make_batch(2, value_size=60), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


@pytest.mark.parametrize("name,expected", [
    ("orders-0", ("orders", 0)), ("my-topic.v2-13", ("my-topic.v2", 13)),
    ("a-b-c-7", ("a-b-c", 7)), ("orders", None), ("orders-x", None), ("-3", None),
    ("bad topic-1", None),
])
def test_partition_dirs_split_on_the_last_dash(name: str, expected) -> None:  # type: ignore
    assert parse_partition_dir(name) == expected


def test_create_get_and_rediscover(tmp_path, clock) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "my-topic.v2", 3, 5)
    fill(m, "orders", 0, 2)
    assert m.get("orders", 1) is None
    assert m.get_or_create("orders", 0) is m.get("orders", 0)
    with pytest.raises(ValueError):
        m.get_or_create("bad/topic", 0)
    m.close()
    again = manager(tmp_path, clock)
    assert again.partitions() == [("my-topic.v2", 3), ("orders", 0)]
    assert again.get("my-topic.v2", 3).log_end_offset == 10  # type: ignore[union-attr]


def test_checkpoints_use_kafkas_format(tmp_path, clock) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 5)
    m.get("orders", 0).delete_records_before(4)  # type: ignore[union-attr]
    m.checkpoint()
    read = lambda name: (tmp_path / name).read_text()  # noqa: E731
    assert read("recovery-point-offset-checkpoint") == "0\n1\norders 0 10\n"
    assert read("log-start-offset-checkpoint") == "0\n1\norders 0 4\n"
    assert read("replication-offset-checkpoint") == "0\n1\norders 0 10\n"


def test_clean_shutdown_skips_recovery_and_reads_only_active_offset_indexes(tmp_path, clock  # type: ignore
                                                                             ) -> None:
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 50)
    m.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    fs = CountingFileSystem()
    again = manager(tmp_path, clock, fs=fs)
    assert again.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert fs.opened[".index"] == 1 and fs.opened[".timeindex"] == 0  # the active's tail check
    log = again.get("orders", 0)
    assert log.log_start_offset == 0 and log.high_watermark == 100  # type: ignore[union-attr]


def test_unclean_shutdown_recovers_from_the_recovery_point(tmp_path, clock, caplog) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 50)
    m.checkpoint()
    fill(m, "orders", 0, 10)
    active = m.get("orders", 0).segments[-1].log.path  # type: ignore[union-attr]
    for log in m.logs():
        log.release()  # crash
    with open(active, "ab") as f:
        f.write(b"\x00" * 30)
    with caplog.at_level(logging.WARNING):
        again = manager(tmp_path, clock)
    assert not again.had_clean_shutdown
    assert "dropped anything from offset 120 on (30 bytes)" in caplog.text
    assert again.get("orders", 0).log_end_offset == 120  # type: ignore[union-attr]


def test_corrupt_checkpoint_means_full_recovery(tmp_path, clock, caplog) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 5)
    m.close()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    with caplog.at_level(logging.WARNING):
        again = manager(tmp_path, clock)
    assert "Ignoring unreadable checkpoint" in caplog.text
    assert again.get("orders", 0).log_end_offset == 10  # type: ignore[union-attr]


def test_delete_renames_then_removes(tmp_path, clock) -> None:  # type: ignore
    seen: list[str] = []

    class Watching(CountingFileSystem):
        def rename(self, src: str, dst: str) -> None:
            seen.append(os.path.basename(dst))
            super().rename(src, dst)

    m = manager(tmp_path, clock, fs=Watching())
    fill(m, "orders", 0, 3)
    assert m.delete("orders", 0) and not m.delete("orders", 0)
    assert seen[-1].startswith("orders-0.") and seen[-1].endswith("-delete")
    assert not any(n.startswith("orders") for n in os.listdir(tmp_path))
    (tmp_path / "orders-1.0123abcd-delete").mkdir()  # left by a crash mid-delete
    (tmp_path / "orders-1.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"")
    m.close()
    assert manager(tmp_path, clock).partitions() == []
    assert not (tmp_path / "orders-1.0123abcd-delete").exists()


def test_update_config_reaches_existing_partitions(tmp_path, clock) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 60)
    fill(m, "other", 0, 60)
    clock.advance(3_600_000)
    assert m.run_retention() == 0  # a week of retention by default
    m.update_config("orders", small_config(**{"retention.ms": "1000"}))
    assert m.get("orders", 0).config.retention_ms == 1000  # type: ignore[union-attr]
    assert m.run_retention() > 0
    assert len(m.get("other", 0).segments) == 3  # type: ignore[union-attr]
    fresh = m.get_or_create("orders", 5)
    assert fresh.config.retention_ms == 1000


def test_flush_due_flushes_rolled_segments(tmp_path, clock) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    fill(m, "orders", 0, 30)
    log = m.get("orders", 0)
    assert log.recovery_point == 0  # type: ignore[union-attr]
    m.flush_due()
    assert log.recovery_point == log.segments[-1].base_offset  # type: ignore[union-attr]


def test_opening_a_thousand_partitions_reads_only_their_active_offset_index(tmp_path, clock  # type: ignore
                                                                            ) -> None:
    m = manager(tmp_path, clock)
    fill(m, "many", 0, 30)  # two segments
    m.close()
    for p in range(1, 1000):  # copies are quicker to make than 1,000 fsynced closes
        shutil.copytree(tmp_path / "many-0", tmp_path / f"many-{p}")
    fs = CountingFileSystem()
    again = manager(tmp_path, clock, fs=fs)
    assert len(again.partitions()) == 1000
    # each active segment's offset index: its tail is checked, giving the end offset
    assert fs.opened[".index"] == 1000 and fs.opened[".timeindex"] == 0
    assert fs.opened[".log"] == 2000  # each segment's log file, nothing else
    assert again.get("many", 999).read(0, 100).size > 0  # type: ignore[union-attr]
    # the first read opens the offset index of the segment read from
    assert fs.opened[".index"] == 1001 and fs.opened[".timeindex"] == 0


def test_storage_failure_means_no_clean_shutdown(tmp_path, clock) -> None:  # type: ignore
    fs = FaultyFileSystem("fsync")
    m = manager(tmp_path, clock, fs=fs)
    fill(m, "orders", 0, 3)
    fs.armed = True
    with pytest.raises(KafkaStorageError):
        m.checkpoint()
    with pytest.raises(KafkaStorageError):
        m.get_or_create("orders", 1)
    m.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    fs.armed = False
    assert not manager(tmp_path, clock, fs=fs).had_clean_shutdown


def test_periodic_work_keeps_untouched_logs_closed(tmp_path, clock) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    for p in range(3):
        fill(m, "orders", p, 30)  # two segments each
    m.close()
    fs = CountingFileSystem()
    again = manager(tmp_path, clock, fs=fs)
    assert fs.opened[".index"] == 3 and fs.opened[".timeindex"] == 0  # active tails checked
    again.flush_due()
    again.checkpoint()
    assert fs.opened[".index"] == 3 and fs.opened[".timeindex"] == 0
    assert (tmp_path / "replication-offset-checkpoint").read_text() == \
        "0\n3\norders 0 60\norders 1 60\norders 2 60\n"
    assert again.run_retention() == 0
    # retention.ms needs each partition's oldest segment's largest timestamp, nothing more
    assert fs.opened[".timeindex"] == 3 and fs.opened[".index"] == 3
    again.close()
    # start-up closed the active offset indexes again; the producer snapshot written at close
    # reads each log's tail through its index (one open), which close then trims (one more)
    assert fs.opened[".index"] == 3 + 2 * 3
