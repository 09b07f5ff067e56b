"""One driver on real files, no network (a lone voter is its own quorum): proposals committed
and delivered in order, listeners that propose from inside, snapshots taken and loaded at the
next start, and an I/O error that stops the replica cleanly."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from spark_log.controller import raft_codec
from spark_log.controller.quorum_errors import DriverStoppedError, MetadataLogError
from spark_log.controller.raft_driver import RaftDriver
from spark_log.protocol import ErrorCode
from spark_log.raft.config import QuorumConfig
from spark_log.raft.messages import Batch, OffsetAndEpoch, VoteRequest

from .quorum_harness import CLUSTER_ID, App
from .support import FailingFileSystem, eventually

ALONE = QuorumConfig(frozenset({1}), election_timeout_ms=50)


def driver(tmp_path: Path, **kw: object) -> RaftDriver:
    return RaftDriver(1, ALONE, tmp_path, cluster_id=CLUSTER_ID, rng=random.Random(1),
                      **kw)  # type: ignore[arg-type]


async def started(d: RaftDriver, app: App | None = None) -> RaftDriver:
    if app is not None:
        d.on_commit(app.on_commit)
        d.on_snapshot(app.on_snapshot)
    await d.start()
    await eventually(lambda: d.is_leader, 5, "the lone voter to lead")
    return d


def test_a_lone_voter_commits_what_it_proposes_and_finds_it_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        app, leaders = App(), []
        d = driver(tmp_path)
        d.on_leader_change(lambda epoch, leader: leaders.append((epoch, leader)))
        await started(d, app)
        assert leaders[-1] == (1, 1)
        for i in range(10):
            offset = d.propose([f"r{i}".encode(), f"s{i}".encode()])
            assert offset is not None
            await d.wait_committed(offset, 5)
        assert app.values == [v for i in range(10) for v in (f"r{i}".encode(),
                                                             f"s{i}".encode())]
        await d.close()
        with pytest.raises(DriverStoppedError):
            d.propose([b"closed"])
        again = App()
        d = await started(driver(tmp_path), again)
        offset = d.propose([b"after restart"])
        assert offset is not None
        await d.wait_committed(offset, 5)
        assert again.values == [*app.values, b"after restart"]
        assert d.replica.epoch == 2  # a new epoch: it never votes again in the old one
        await d.close()
    asyncio.run(scenario())


def test_listeners_may_propose_and_still_see_batches_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        seen: list[tuple[int, bytes]] = []
        d = driver(tmp_path)

        def on_commit(batches: Sequence[Batch]) -> None:
            for batch in batches:
                for i, record in enumerate(batch.records if not batch.control else ()):
                    seen.append((batch.base_offset + i, record))
                    if record.startswith(b"echo") and len(record) < 12:
                        d.propose([record + b"!"])  # a new step, from inside delivery
        d.on_commit(on_commit)
        await started(d)
        offset = d.propose([b"echo"])
        assert offset is not None
        await eventually(lambda: len(seen) == 9, 5, "the echoes")
        assert [r for _, r in seen] == [b"echo" + b"!" * i for i in range(9)]
        assert [o for o, _ in seen] == sorted(o for o, _ in seen)
        await d.close()
    asyncio.run(scenario())


def test_a_snapshot_is_loaded_first_at_the_next_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = App()
        d = await started(driver(tmp_path), app)
        for i in range(5):
            offset = d.propose([f"r{i}".encode()])
            await d.wait_committed(offset, 5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="cannot snapshot"):
            d.take_snapshot(OffsetAndEpoch(1000, 1), b"beyond the high watermark")
        d.take_snapshot(*app.snapshot())  # the driver still works after a refused snapshot
        offset = d.propose([b"after the snapshot"])
        await d.wait_committed(offset, 5)  # type: ignore[arg-type]
        await d.close()
        again = App()
        d = await started(driver(tmp_path), again)
        assert again.snapshots_loaded == 1
        assert again.values == app.values
        assert d.replica.log.start_offset == 6
        await d.close()
    asyncio.run(scenario())


def test_an_io_error_stops_the_replica_cleanly(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        fs = FailingFileSystem("fsync")
        app = App()
        d = await started(driver(tmp_path, fs=fs), app)
        committed = d.propose([b"durable"])
        await d.wait_committed(committed, 5)  # type: ignore[arg-type]
        segment = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
        fs.armed = True
        with caplog.at_level(logging.ERROR, logger="spark_log.controller"), \
                pytest.raises(DriverStoppedError, match="injected fsync failure"):
            d.propose([b"never acknowledged"])
        errors = [r for r in caplog.records if r.name.startswith("spark_log.controller")]
        assert len(errors) == 1 and "Quorum replica 1 stopped" in errors[0].getMessage()
        size = segment.stat().st_size
        assert d.stopped and not d.is_leader
        for attempt in (lambda: d.propose([b"more"]),
                        lambda: d.take_snapshot(OffsetAndEpoch(2, 1), b"")):
            with pytest.raises(DriverStoppedError):
                attempt()
        with pytest.raises(DriverStoppedError):
            await d.wait_committed(5, 1)
        await asyncio.sleep(0.1)  # the timer does not go on stepping a stopped replica
        assert fs.failures == 1 and segment.stat().st_size == size
        await d.close()
        fs.armed = False
        again = App()
        await started(driver(tmp_path), again)
        assert again.values[0] == b"durable"
    asyncio.run(scenario())


def test_a_damaged_quorum_state_stops_the_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        d = await started(driver(tmp_path))
        await d.close()
        (tmp_path / "__cluster_metadata-0" / "quorum-state").write_text("{")
        with pytest.raises(MetadataLogError, match="quorum-state is damaged"):
            await driver(tmp_path).start()
    asyncio.run(scenario())


def test_a_request_from_another_cluster_is_answered_inconsistent_cluster_id(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        d = await started(driver(tmp_path))
        vote = raft_codec.encode_request(VoteRequest(9, 2, 1, 100), 1, "another-cluster")
        answer = await d.handle_request(vote)
        assert answer is not None and answer.error_code == ErrorCode.inconsistent_cluster_id
        assert d.replica.epoch == 1  # raft never saw it
        await d.close()
        assert await d.handle_request(raft_codec.encode_request(
            VoteRequest(9, 2, 1, 100), 1, CLUSTER_ID)) is None  # closed: no answer
    asyncio.run(scenario())
