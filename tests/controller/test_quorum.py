"""Three drivers in one process on real files and loopback sockets form a quorum: one leader;
records proposed on it are committed and delivered in order to every replica; a leader stopped
abruptly is replaced within a bound derived from the timeouts; it restarts from its files and
rejoins as a follower with every committed record; a follower far behind gets a snapshot."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from spark_log.controller.quorum_errors import DriverStoppedError, ProposalLostError
from spark_log.protocol import decode_entity, encode_entity
from spark_log.protocol.api_table import QUORUM_API_TABLE
from spark_log.protocol.entity_build import build

from .quorum_harness import Quorum
from .support import eventually


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_three_voters_elect_one_leader_and_deliver_records_in_order(tmp_path: Path) -> None:
    """An observer (node 4, not a voter) gets every record too, and never leads."""
    async def scenario() -> None:
        quorum = Quorum(tmp_path, observers=1)
        try:
            await quorum.start()
            leader = await quorum.leader()
            expected = []
            for i in range(20):
                values = [f"record-{i}-{j}".encode() for j in range(i % 3 + 1)]
                await quorum.propose(values)
                expected += values
            await quorum.all_applied(expected)
            assert quorum.leaders() == [leader]
            epochs = {quorum.driver(i).replica.epoch for i in quorum.nodes}
            assert len(epochs) == 1 and not quorum.driver(4).replica.is_voter
            follower = next(i for i in quorum.nodes if i != leader)
            assert quorum.driver(follower).propose([b"not the leader"]) is None
        finally:
            await quorum.close()
    run(scenario())


def test_describe_quorum_on_the_leader_shows_every_voter_caught_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        quorum = Quorum(tmp_path)
        try:
            await quorum.start()
            await quorum.propose([b"x"])
            leader = await quorum.leader()
            request = build(QUORUM_API_TABLE[55].request_type(1), {"topics": [
                {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})

            async def described() -> object:
                answer = await quorum.driver(leader).handle_request(request)
                answer = decode_entity(type(answer), encode_entity(answer))
                return answer.topics[0].partitions[0]
            end = quorum.driver(leader).replica.log.end_offset

            async def all_caught_up() -> bool:
                p = await described()
                return all(v.log_end_offset == end and v.last_caught_up_timestamp > 0
                           for v in p.current_voters)  # type: ignore[attr-defined]
            deadline = time.monotonic() + 10
            while not await all_caught_up():
                assert time.monotonic() < deadline, await described()
                await asyncio.sleep(0.01)
            p = await described()
            assert (p.leader_id, p.high_watermark) == (leader, end)  # type: ignore
            follower = next(i for i in quorum.nodes if i != leader)
            refused = await quorum.driver(follower).handle_request(request)
            assert refused.topics[0].partitions[0].leader_id == leader  # type: ignore
        finally:
            await quorum.close()
    run(scenario())


def test_a_killed_leader_is_replaced_in_time_and_rejoins_with_every_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario() -> float:
        quorum = Quorum(tmp_path)
        config = quorum.config
        try:
            await quorum.start()
            expected = []
            for i in range(10):
                expected.append(f"before-{i}".encode())
                await quorum.propose([expected[-1]])
            await quorum.all_applied(expected)
            old = await quorum.leader()
            old_epoch = quorum.driver(old).replica.epoch
            killed_at = time.monotonic()
            await quorum.nodes[old].kill()
            new = await quorum.leader(timeout_s=10, other_than=old)
            elapsed_ms = (time.monotonic() - killed_at) * 1000
            # The followers notice within a fetch timeout; an election then takes an election
            # timeout plus its jitter (one more timeout) and, after a split vote, a backoff and
            # a second round. Anything past that is a bug, not a slow machine.
            bound_ms = config.fetch_timeout_ms + 2 * (
                2 * config.election_timeout_ms + config.election_backoff_max_ms) + 250
            assert elapsed_ms < bound_ms, (elapsed_ms, bound_ms)
            assert quorum.driver(new).replica.epoch > old_epoch
            with pytest.raises(DriverStoppedError):
                quorum.driver(old).propose([b"dead"])
            for i in range(5):
                expected.append(f"after-{i}".encode())
                await quorum.propose([expected[-1]])
            await quorum.restart(old)
            await quorum.all_applied(expected)
            await eventually(lambda: quorum.driver(old).replica.leader_id == new, 10,
                             "the old leader to follow the new one")
            expected.append(b"last")
            await quorum.propose([b"last"])
            await quorum.all_applied(expected)
            return elapsed_ms
        finally:
            await quorum.close()
    elapsed = run(scenario())
    with capsys.disabled():
        print(f"\nnew leader {elapsed:.0f} ms after the old one was killed")


def test_a_follower_far_behind_gets_a_snapshot(tmp_path: Path) -> None:
    async def scenario() -> None:
        quorum = Quorum(tmp_path, segment_bytes=4096)
        try:
            await quorum.start()
            leader = await quorum.leader()
            lagging = next(i for i in quorum.nodes if i != leader)
            expected = [b"early"]
            await quorum.propose(expected)
            await quorum.all_applied(expected)
            await quorum.nodes[lagging].kill()
            for i in range(150):
                expected.append(f"while-away-{i:03d}-{'x' * 40}".encode())
                await quorum.propose([expected[-1]])
            for node_id in quorum.nodes:
                if node_id != lagging:
                    app = quorum.nodes[node_id].app
                    await eventually(lambda app=app: app.values == expected)
                    quorum.driver(node_id).take_snapshot(*app.snapshot())
            leader = await quorum.leader()
            leader_log = quorum.driver(leader).replica.log
            assert leader_log.start_offset > 100
            segments = sorted((quorum.nodes[leader].directory / "__cluster_metadata-0").glob(
                "*.log"))
            assert int(segments[0].name.split(".")[0]) > 0  # old segments are gone
            await quorum.restart(lagging)
            await quorum.all_applied(expected)
            app = quorum.nodes[lagging].app
            assert app.snapshots_loaded == 1
            expected.append(b"after the snapshot")
            await quorum.propose([expected[-1]])
            await quorum.all_applied(expected)
            assert quorum.driver(lagging).metadata_log.snapshot_id == leader_log.snapshot_id
        finally:
            await quorum.close()
    run(scenario())


def test_a_proposal_of_a_leader_cut_off_from_the_quorum_is_reported_lost(tmp_path: Path) -> None:
    async def scenario() -> None:
        quorum = Quorum(tmp_path)
        waiting = None
        try:
            await quorum.start()
            expected = [b"committed"]
            await quorum.propose(expected)
            old = await quorum.leader()
            await quorum.nodes[old].cut_off()  # no follower can fetch from it
            lost = quorum.driver(old).propose([b"never replicated"])
            assert lost is not None
            waiting = asyncio.ensure_future(quorum.driver(old).wait_committed(lost, 20))
            new = await quorum.leader(other_than=old)
            expected.append(b"from the new leader")
            offset = quorum.driver(new).propose(expected[-1:])
            assert offset is not None and offset > lost  # its epoch-start record took `lost`
            await quorum.driver(new).wait_committed(offset, 10)  # type: ignore[arg-type]
            await quorum.nodes[old].listen()  # reachable again: it follows and truncates
            with pytest.raises(ProposalLostError, match=f"offset {lost} in epoch"):
                await waiting
            await quorum.all_applied(expected)
        finally:
            await quorum.close()
            if waiting is not None:
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
    run(scenario())


def test_every_proposal_of_a_cut_off_leader_is_reported_lost_while_the_quorum_idles(
        tmp_path: Path) -> None:
    """Two batches proposed on a leader nobody can reach; the new leader's log is shorter and
    its epoch-start record, the only thing committed after, covers the first offset alone. The
    second is lost all the same: a later epoch is committed below it, and epochs never go back
    along a log. (Nothing more is proposed, as in a quiet cluster, so nothing else settles it.)
    A fetch timeout of a second gives the old leader that long to take both proposals before it
    resigns for want of fetches, however busy the machine."""
    async def scenario() -> None:
        quorum = Quorum(tmp_path, fetch_timeout_ms=1000)
        waits: list[asyncio.Future[None]] = []
        try:
            await quorum.start()
            await quorum.propose([b"committed"])
            old = await quorum.leader()
            await quorum.nodes[old].cut_off()
            offsets = [quorum.driver(old).propose([b"first"]),
                       quorum.driver(old).propose([b"second"])]
            waits = [asyncio.ensure_future(quorum.driver(old).wait_committed(o, 10))
                     for o in offsets if o is not None]
            assert len(waits) == 2
            new = await quorum.leader(other_than=old)
            await quorum.all_applied([b"committed"], nodes=[new])
            await quorum.nodes[old].listen()  # reachable again: it follows and truncates
            for offset, waiting in zip(offsets, waits, strict=True):
                with pytest.raises(ProposalLostError, match=f"offset {offset} in epoch"):
                    await waiting
            assert quorum.driver(old).replica.log.end_offset == offsets[0] + 1  # type: ignore
        finally:
            await quorum.close()
            for waiting in waits:
                waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
    run(scenario())


def test_a_leader_that_resigns_hands_over_before_a_fetch_timeout(tmp_path: Path) -> None:
    """EndQuorumEpoch: the most up-to-date follower stands at once instead of waiting for its
    fetch timeout to notice the leader is gone."""
    async def scenario() -> None:
        quorum = Quorum(tmp_path, fetch_timeout_ms=2000, election_timeout_ms=1000,
                        request_timeout_ms=1000)
        try:
            await quorum.start()
            await quorum.propose([b"before"])
            old = await quorum.leader()
            resigned_at = time.monotonic()
            await quorum.nodes[old].stop()  # resign, then close
            await quorum.leader(other_than=old)
            elapsed_ms = (time.monotonic() - resigned_at) * 1000
            assert elapsed_ms < quorum.config.fetch_timeout_ms, elapsed_ms
        finally:
            await quorum.close()
    run(scenario())


def test_a_restarted_follower_rejoins_its_leader_without_an_election(tmp_path: Path) -> None:
    """A follower killed and restarted finds the leader its election state names: its
    listeners learn that leader at once (the broker sends controller requests to it), and it
    fetches at once, so nobody stands for election and the epoch stays the same."""
    async def scenario() -> None:
        quorum = Quorum(tmp_path)
        try:
            await quorum.start()
            await quorum.propose([b"before"])
            leader = await quorum.leader()
            epoch = quorum.driver(leader).replica.epoch
            follower = next(i for i in quorum.nodes if i != leader)
            await quorum.nodes[follower].kill()
            await quorum.propose([b"while down"])
            told: list[tuple[int, int]] = []
            quorum.nodes[follower].attach = lambda d: d.on_leader_change(
                lambda e, leader_id: told.append((e, leader_id)))
            await quorum.restart(follower)
            assert told[:1] == [(epoch, leader)]  # before its first fetch
            await quorum.all_applied([b"before", b"while down"], nodes=[follower])
            # Two fetch timeouts: without its first fetch it would have stood by now.
            await asyncio.sleep(2 * quorum.config.fetch_timeout_ms / 1000)
            assert all(quorum.driver(i).replica.epoch == epoch for i in quorum.nodes)
            assert quorum.driver(follower).replica.leader_id == leader
        finally:
            await quorum.close()
    run(scenario())
