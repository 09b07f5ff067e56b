"""The quorum controller on real raft drivers and files: a lone voter (bootstrap, topics,
broker registration, heartbeats and session expiry on a clock moved by hand) and three voters
on loopback (followers answering NOT_CONTROLLER, followers' images, fail-over)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from spark_log.clock import SYSTEM_CLOCK
from spark_log.controller.controller_config import ControllerTimings
from spark_log.controller.controller_result import default_message
from spark_log.controller.quorum_controller import QuorumController
from spark_log.metadata import decode_record
from spark_log.metadata.records import FeatureLevelRecord
from spark_log.protocol import ErrorCode
from spark_log.raft.messages import Batch

from .control_fixtures import request
from .controller_harness import (
    MV,
    ControllerQuorum,
    FakeClock,
    LoneController,
    allocate_producer_ids,
    create_topics,
    delete_topics,
    heartbeat,
    registration,
    run_in_cluster,
    unfenced_broker,
)
from .support import eventually

NOT_CONTROLLER = ErrorCode.not_controller


class FeatureCount:
    """Counts the FeatureLevelRecords committed (a commit listener)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if not batch.control:
                self.count += sum(isinstance(decode_record(r), FeatureLevelRecord)
                                  for r in batch.records)


def test_the_bootstrap_records_are_written_at_the_first_start_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        for _ in range(2):
            node = LoneController(tmp_path)
            features = FeatureCount()
            node.driver.on_commit(features)
            assert not node.controller.active
            controller = await node.start()
            assert controller.image.metadata_version == MV
            assert controller.leader_id == 1
            assert features.count == 1  # the whole log replayed: one bootstrap, ever
            await node.close()
    asyncio.run(scenario())


def test_topics_are_created_and_deleted_once_committed(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path)
        controller = await node.start()
        await unfenced_broker(controller, 1)
        created = await controller.handle(create_topics("orders", "audit", partitions=3))
        assert [(t.name, t.error_code, t.num_partitions) for t in created.topics] == \
            [("orders", 0, 3), ("audit", 0, 3)]
        orders = controller.image.topic("orders")  # committed before the answer
        assert orders is not None and orders.id == created.topics[0].topic_id
        assert node.loader.image.topic("audit") is not None
        again = await controller.handle(create_topics("orders"))
        assert again.topics[0].error_code == ErrorCode.topic_already_exists
        deleted = await controller.handle(delete_topics("orders", "missing"))
        assert {(r.name, r.error_code) for r in deleted.responses} == {
            ("orders", 0), ("missing", ErrorCode.unknown_topic_or_partition)}
        assert controller.image.topic("orders") is None
        assert controller.image.topic("audit") is not None
        await node.close()
    asyncio.run(scenario())


def test_a_broker_is_unfenced_once_its_metadata_reaches_its_registration(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path)
        controller = await node.start()
        registered = await controller.handle(registration(5, version=0))
        epoch = registered.broker_epoch
        assert registered.error_code == 0 and epoch > 0
        assert controller.image.broker(5).fenced  # type: ignore[union-attr]
        behind = await controller.handle(heartbeat(5, epoch, epoch - 1))
        assert (behind.error_code, behind.is_caught_up, behind.is_fenced) == (0, False, True)
        caught_up = await controller.handle(heartbeat(5, epoch, epoch, version=0))
        assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
        assert not controller.image.broker(5).fenced  # type: ignore[union-attr]
        stale = await controller.handle(heartbeat(5, epoch + 1, epoch))
        assert stale.error_code == ErrorCode.stale_broker_epoch
        foreign = await controller.handle(registration(6, cluster_id="another"))
        assert foreign.error_code == ErrorCode.inconsistent_cluster_id
        unregistered = await controller.handle(request(64, 0, broker_id=5))
        assert unregistered.error_code == 0 and controller.image.broker(5) is None
        await node.close()
    asyncio.run(scenario())


def test_a_broker_that_stops_heartbeating_is_fenced_after_its_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        node = LoneController(tmp_path, clock, broker_session_timeout_ms=9000)
        controller = await node.start()
        first, second = await unfenced_broker(controller, 1), await unfenced_broker(controller, 2)
        created = await controller.handle(request(19, 7, timeout=1000, validate_only=False,
                                                  topics=[{"name": "t", "num_partitions": -1,
                                                           "replication_factor": -1,
                                                           "assignments": [
                                                               {"partition_index": 0,
                                                                "broker_ids": [1, 2]}],
                                                           "configs": []}]))
        assert created.topics[0].error_code == 0
        assert controller.image.partition("t", 0).leader == 1  # type: ignore[union-attr]
        offset = controller.image.provenance.offset
        clock.now += 9000  # broker 1 is silent; broker 2 keeps its session
        await controller.handle(heartbeat(2, second, offset))
        assert not controller.image.broker(1).fenced  # type: ignore[union-attr]
        clock.now += 1
        await controller.handle(heartbeat(2, second, offset))
        await eventually(lambda: controller.image.broker(1).fenced, 5,  # type: ignore
                         "broker 1 to be fenced")
        assert not controller.image.broker(2).fenced  # type: ignore[union-attr]
        assert controller.image.partition("t", 0).leader == 2  # type: ignore[union-attr]
        beat = await controller.handle(heartbeat(1, first, offset))  # it comes back
        assert not beat.is_fenced and not controller.image.broker(1).fenced  # type: ignore
        await node.close()
    asyncio.run(scenario())


def test_the_session_timer_fences_a_silent_broker_on_its_own(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path, SYSTEM_CLOCK.monotonic_ms,
                              broker_session_timeout_ms=150)
        controller = await node.start()
        await unfenced_broker(controller, 1)
        start = time.monotonic()
        await eventually(lambda: controller.image.broker(1).fenced, 5,  # type: ignore
                         "broker 1 to be fenced")
        assert time.monotonic() - start >= 0.1
        await node.close()
    asyncio.run(scenario())


def test_a_held_event_loop_does_not_expire_the_sessions_it_kept_from_being_heard(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path, SYSTEM_CLOCK.monotonic_ms,
                              broker_session_timeout_ms=400)
        controller = await node.start()
        epoch = await unfenced_broker(controller, 1)
        time.sleep(1.6)  # a long metadata apply: the expiry timer comes due meanwhile
        await asyncio.sleep(0.01)  # the late timer runs
        assert not controller.image.broker(1).fenced  # type: ignore[union-attr]
        beat = await controller.handle(heartbeat(1, epoch, controller.image.provenance.offset))
        assert not beat.is_fenced  # the heartbeat that waited is heard in time
        # a broker that stays silent is still fenced, a session later
        await eventually(lambda: controller.image.broker(1).fenced, 5,  # type: ignore
                         "broker 1 to be fenced")
        await node.close()
    asyncio.run(scenario())


def test_leaderless_partitions_are_elected_uncleanly_once_their_topic_allows_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path, timings=ControllerTimings(
            unclean_election_check_interval_ms=20))
        controller = await node.start()
        epochs = {b: await unfenced_broker(controller, b) for b in (1, 2)}
        for name in ("lossy", "safe"):
            created = await controller.handle(request(19, 7, timeout=1000, validate_only=False,
                                                      topics=[{
                "name": name, "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                "configs": []}]))
            assert created.topics[0].error_code == 0
        offset = controller.image.provenance.offset
        for broker_id in (2, 1):  # the ISR shrinks to [1], then 1 goes too
            beat = await controller.handle(heartbeat(broker_id, epochs[broker_id], offset,
                                                     want_fence=True))
            assert beat.is_fenced
        await controller.handle(heartbeat(2, epochs[2], offset + 10))
        assert not controller.image.broker(2).fenced  # type: ignore[union-attr]
        assert controller.image.partition("lossy", 0).leader == -1  # type: ignore
        altered = await controller.handle(request(44, 1, validate_only=False, resources=[{
            "resource_type": 2, "resource_name": "lossy", "configs": [{
                "name": "unclean.leader.election.enable", "config_operation": 0,
                "value": "true"}]}]))
        assert altered.responses[0].error_code == 0
        await eventually(lambda: controller.image.partition(  # type: ignore
            "lossy", 0).leader == 2, 5, "the unclean election")
        assert controller.image.partition("safe", 0).leader == -1  # type: ignore
        await node.close()
    with caplog.at_level(logging.WARNING, logger="spark_log.controller.quorum_controller"):
        asyncio.run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and "unclean leader election" in r.getMessage()]
    assert len(warnings) == 1 and "partition lossy-0" in warnings[0] \
        and "may be lost" in warnings[0]


def test_followers_answer_not_controller_and_see_what_the_leader_commits(
        tmp_path: Path) -> None:
    async def scenario(cluster: ControllerQuorum, leader: int, controller: QuorumController,
                       _: int) -> None:
        created = await controller.handle(create_topics("events", partitions=2))
        assert created.topics[0].error_code == 0
        assert controller.image.topic("events") is not None  # answered once committed
        offset = controller.image.provenance.offset
        for node_id in set(cluster.controllers) - {leader}:
            image = await cluster.loaders[node_id].wait_for_offset(offset, 10)
            assert image.topic("events") is not None
            follower = cluster.controllers[node_id]
            await eventually(lambda f=follower: f.image.topic("events"), 10,  # type: ignore
                             "the follower's controller to replay the topic")
            assert not follower.active and follower.leader_id == leader
            refused = await follower.handle(create_topics("other"))
            assert [(t.name, t.error_code, t.error_message) for t in refused.topics] == \
                [("other", NOT_CONTROLLER, default_message(NOT_CONTROLLER))]
            beat = await follower.handle(heartbeat(1, 5, 5))
            assert (beat.error_code, beat.is_fenced) == (NOT_CONTROLLER, True)
    run_in_cluster(tmp_path, scenario)


def test_a_new_active_controller_takes_over_with_everything_committed(tmp_path: Path) -> None:
    async def scenario(cluster: ControllerQuorum, first: int, controller: QuorumController,
                       epoch: int) -> None:
        await controller.handle(create_topics("before"))
        blocks = [await controller.handle(allocate_producer_ids(1, epoch)) for _ in range(2)]
        await cluster.kill(first)
        second = await cluster.active(other_than=first)
        successor = cluster.controllers[second]
        assert successor.image.topic("before") is not None
        assert successor.image.broker(1) is not None
        created = await successor.handle(create_topics("after"))
        assert created.topics[0].error_code == 0
        blocks += [await successor.handle(allocate_producer_ids(1, epoch)) for _ in range(2)]
        assert all(b.error_code == 0 for b in blocks)
        ranges = [range(b.producer_id_start, b.producer_id_start + b.producer_id_len)
                  for b in blocks]
        assert all(a.stop <= b.start for a, b in itertools.pairwise(ranges))
    run_in_cluster(tmp_path, scenario)


def test_a_request_waiting_for_its_commit_is_answered_not_controller_on_close(
        tmp_path: Path) -> None:
    async def scenario(cluster: ControllerQuorum, leader: int, controller: QuorumController,
                       _: int) -> None:
        for node_id in set(cluster.controllers) - {leader}:
            await cluster.kill(node_id)  # nothing can commit any more
        log = cluster.quorum.driver(leader).replica.log
        end = log.end_offset
        waiting = asyncio.ensure_future(controller.handle(create_topics("stuck")))
        await eventually(lambda: log.end_offset > end, 5, "the proposal to be appended")
        assert not waiting.done()
        await controller.close()
        answer = await asyncio.wait_for(waiting, 5)
        assert answer.topics[0].error_code == NOT_CONTROLLER
        assert controller.image.topic("stuck") is None and not controller.active
    run_in_cluster(tmp_path, scenario)


def test_an_isr_change_is_answered_once_committed(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path)
        controller = await node.start()
        epochs = {b: await unfenced_broker(controller, b) for b in (1, 2)}
        await controller.handle(create_topics("orders", factor=2))
        orders = controller.image.topic("orders")
        assert orders is not None
        partition = orders.partitions[0]
        leader, other = partition.leader, next(r for r in partition.replicas
                                                if r != partition.leader)
        altered = await controller.handle(request(56, 3, broker_id=leader,
                                                  broker_epoch=epochs[leader], topics=[{
            "topic_id": orders.id, "partitions": [{
                "partition_index": 0, "leader_epoch": partition.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": leader, "broker_epoch": epochs[leader]}],
                "leader_recovery_state": 0, "partition_epoch": partition.partition_epoch}]}]))
        (answer,) = altered.topics[0].partitions
        assert answer.error_code == 0 and answer.isr == (leader,)
        assert controller.image.partition("orders", 0).isr == (leader,)  # committed first
        assert other not in node.loader.image.partition("orders", 0).isr
        await node.close()
    asyncio.run(scenario())
