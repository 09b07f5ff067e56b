"""The cleaner next to a live log: reads and appends while a round runs on its worker thread,
deletion and retention racing a round, starting and stopping, and failures."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import threading
from collections.abc import Iterator

import pytest

from spark_log.records.batch_header import BatchHeader
from spark_log.storage.cleaner.cleaner_batch_policy import DELETE_EMPTY, BatchDecision
from spark_log.storage.cleaner.cleaner_config import CleanerConfig
from spark_log.storage.cleaner.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

from ..cleaner_support import clean, compact_config, latest, read_all, updates_over, write_updates
from ..conftest import FaultyFileSystem

WAIT_S = 30.0


@pytest.fixture
def manager(tmp_path, clock) -> Iterator[LogManager]:  # type: ignore[no-untyped-def]
    logs = LogManager(str(tmp_path), default_config=compact_config(), clock=clock)
    yield logs
    if not logs.failure.failed:
        logs.close()


def fill(log: PartitionLog, count: int, keys: int) -> list[tuple[bytes, bytes | None]]:
    updates = updates_over(keys=keys, count=count)
    write_updates(log, updates, per_batch=20)
    log.roll()
    return updates


class Gate:
    """A batch policy that holds the worker at its first batch until released or aborted."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.cleaner: LogCleaner | None = None

    def include_in_offset_map(self, header: BatchHeader) -> bool:
        return True

    def check_batch(self, header: BatchHeader) -> BatchDecision:
        self.entered.set()
        assert self.cleaner is not None and self.cleaner.current_round is not None
        abort = self.cleaner.current_round.abort
        while not (self.release.is_set() or abort.is_set()):
            self.release.wait(0.01)
        return DELETE_EMPTY

    def __call__(self, log: object, start: int, end: int) -> Gate:
        return self


def gated(manager: LogManager) -> tuple[LogCleaner, Gate]:
    gate = Gate()
    cleaner = LogCleaner(manager, batch_policy=gate)
    gate.cleaner = cleaner
    return cleaner, gate


async def entered(gate: Gate) -> None:
    assert await asyncio.to_thread(gate.entered.wait, WAIT_S), "the worker never started"


def leftovers(directory: str) -> list[str]:
    names = []
    for _, _, files in os.walk(directory):
        names += [n for n in files if n.endswith((".cleaned", ".swap"))]
    return names


def test_reads_and_appends_go_on_while_a_round_runs_in_the_worker(manager) -> None:  # type: ignore
    manager.update_config("t", compact_config(**{"internal.segment.bytes": str(64 << 10)}))
    log = manager.get_or_create("t", 0)
    updates = fill(log, count=30_000, keys=500)
    cleaner = LogCleaner(manager)
    rng = random.Random(7)

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(cleaner.clean_once())
        reads = appends = 0
        while not task.done():
            offset = rng.randrange(log.log_start_offset, log.log_end_offset)
            back = read_all(log, offset) if rng.random() < 0.05 else None
            data = log.read(offset, 4096).read_bytes()
            assert data and (back is None or back.records)
            write_updates(log, [(b"key-1", b"during")])
            reads, appends = reads + 1, appends + 1
            await asyncio.sleep(0)
        assert await task is not None
        return reads, appends

    reads, appends = asyncio.run(scenario())
    cleaner.driver.close()
    assert reads > 10 and cleaner.rounds == 1
    after = read_all(log)
    expected = latest(updates)
    expected[b"key-1"] = b"during"
    assert after.by_key() == expected
    assert log.log_end_offset == 30_000 + appends


def test_deleting_a_log_aborts_its_round_and_leaves_nothing_behind(manager) -> None:  # type: ignore
    fill(manager.get_or_create("t", 0), count=2000, keys=50)
    cleaner, gate = gated(manager)

    async def scenario() -> None:
        cleaner.start()
        await entered(gate)
        manager.delete("t", 0)  # blocks until the worker let go
        assert cleaner.current_round is None or cleaner.current_round.abort.is_set()
        await cleaner.stop()

    asyncio.run(scenario())
    assert manager.get("t", 0) is None and cleaner.rounds == 0
    assert not leftovers(manager.data_dir)
    assert not os.path.exists(os.path.join(manager.data_dir, CLEANER_OFFSET_CHECKPOINT))
    assert cleaner.manager.in_progress == set()


def test_segments_removed_mid_round_make_the_swap_back_off(manager) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    fill(log, count=2000, keys=50)
    cleaner, gate = gated(manager)
    cut = log.segments[2].base_offset

    async def scenario() -> None:
        task = asyncio.create_task(cleaner.clean_once())
        await entered(gate)
        log.delete_records_before(cut)  # DeleteRecords removes the first two segments
        gate.release.set()
        await task

    asyncio.run(scenario())
    cleaner.driver.close()
    assert cleaner.rounds == 0 and cleaner.manager.checkpoint(("t", 0)) is None
    assert not leftovers(log.dir)
    after = read_all(log)
    assert after.offsets[0] == cut and len(after.records) == 2000 - cut  # untouched


def test_the_service_cleans_in_the_background_and_stops(manager) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    cleaner = LogCleaner(manager, CleanerConfig(backoff_ms=60_000))

    async def scenario() -> None:
        cleaner.start()
        fill(log, count=500, keys=5)
        cleaner.wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while cleaner.rounds < 1:
            assert loop.time() < deadline, "no round ran"
            await asyncio.sleep(0.01)
        await cleaner.stop()

    asyncio.run(scenario())
    assert len(read_all(log).records) == 5


def test_stopping_aborts_the_round_in_progress(manager) -> None:  # type: ignore
    log = manager.get_or_create("t", 0)
    fill(log, count=2000, keys=50)
    cleaner, gate = gated(manager)

    async def scenario() -> None:
        cleaner.start()
        await entered(gate)
        await cleaner.stop()

    asyncio.run(scenario())
    assert cleaner.rounds == 0 and cleaner.current_round is None
    assert not leftovers(log.dir) and len(read_all(log).records) == 2000


def test_a_disabled_cleaner_does_not_start(manager) -> None:  # type: ignore
    fill(manager.get_or_create("t", 0), count=500, keys=5)
    cleaner = LogCleaner(manager, CleanerConfig(enable=False, backoff_ms=0))

    async def scenario() -> None:
        cleaner.start()
        await asyncio.sleep(0)
        assert cleaner.current_round is None
        await cleaner.stop()

    asyncio.run(scenario())
    assert cleaner.rounds == 0 and len(read_all(manager.get("t", 0)).records) == 500


def test_an_unreadable_batch_marks_only_its_log_uncleanable(manager, caplog) -> None:  # type: ignore
    bad, good = manager.get_or_create("bad", 0), manager.get_or_create("good", 0)
    fill(bad, count=500, keys=5)
    fill(good, count=500, keys=5)
    path = bad.segments[0].log.path
    with open(path, "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0xFF]))
    cleaner = LogCleaner(manager)
    with caplog.at_level(logging.ERROR):
        while clean(cleaner) is not None:
            pass
    cleaner.driver.close()
    assert "Cannot clean bad-0" in caplog.text
    assert cleaner.manager.is_uncleanable(bad) and not cleaner.manager.is_uncleanable(good)
    assert len(read_all(good).records) == 5 and not leftovers(bad.dir)


def test_an_io_error_while_cleaning_takes_the_directory_offline(tmp_path, clock) -> None:  # type: ignore
    fs = FaultyFileSystem("write")
    logs = LogManager(str(tmp_path), default_config=compact_config(), clock=clock, fs=fs)
    fill(logs.get_or_create("t", 0), count=500, keys=5)
    cleaner = LogCleaner(logs)
    fs.armed = True
    clean(cleaner)
    cleaner.driver.close()
    assert fs.failures >= 1 and logs.failure.failed
    assert "cleaning t-0" in str(logs.failure.error)


def test_the_replaced_segments_files_are_closed_on_the_worker(manager, monkeypatch) -> None:  # type: ignore
    # Closing a deleted file frees its cached pages: slow, so never on the event loop.
    log = manager.get_or_create("t", 0)
    fill(log, count=2000, keys=50)
    replaced = {os.stat(s.log.path).st_ino for s in log.segments[:-1]}
    closed_by: dict[int, str] = {}
    real_close = os.close

    def close(fd: int) -> None:
        with contextlib.suppress(OSError):
            stat = os.fstat(fd)
            if stat.st_nlink == 0:  # a deleted file's last close (a live file may reuse the
                # inode number later, and be closed anywhere)
                closed_by[stat.st_ino] = threading.current_thread().name
        real_close(fd)

    monkeypatch.setattr(os, "close", close)
    cleaner = LogCleaner(manager)
    assert clean(cleaner) is not None
    cleaner.driver.close()  # waits for the work queued on the worker
    monkeypatch.undo()
    assert len(replaced) > 1
    assert {closed_by.get(inode, "") for inode in replaced} == {"log-cleaner_0"}
