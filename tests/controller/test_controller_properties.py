"""Property tests over random cluster histories driven through the controller's decisions, each
result appended to a working image as the driver will: brokers register (new incarnations and
re-registrations), heartbeat (behind, caught up, wanting to be fenced or to shut down), go
silent and are fenced, unregister; topics are created (some allowing unclean elections), grown
and deleted; leaders are elected and rebalanced; producer-id blocks are handed out.

After every step: a partition is led by an active broker or by none, and by none only when no
ISR member is active; new partitions lead on active brokers and, racks aside, use fenced ones
only when too few are unfenced; a new incarnation's epoch is the offset of its
RegisterBrokerRecord; no producer id is handed out twice; and the image survives a snapshot."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.controller.broker_heartbeats import BrokerHeartbeats
from spark_log.controller.cluster_control import (
    broker_heartbeat,
    fence_stale_broker,
    register_broker,
    unregister_broker,
)
from spark_log.controller.controller_result import ControllerResult
from spark_log.controller.feature_control import bootstrap_records
from spark_log.controller.leader_election import (
    PREFERRED,
    UNCLEAN,
    balance_partition_leaders,
    elect_unclean_leaders,
)
from spark_log.controller.leader_election import elect_leaders as elect
from spark_log.controller.metadata_snapshot import read_snapshot, snapshot_id, write_snapshot
from spark_log.controller.producer_id_control import allocate_producer_ids
from spark_log.controller.replication_control import create_partitions, create_topics
from spark_log.controller.topic_deletion import delete_topics
from spark_log.controller.working_image import WorkingImage
from spark_log.metadata import MetadataImage
from spark_log.metadata.records import PartitionRecord, RegisterBrokerRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import MV, SETTINGS, incarnation, request

BROKERS = range(1, 6)
TIMEOUT = SETTINGS.broker_session_timeout_ms


class Cluster:
    """The active controller's state, driven step by step, with the checks after each."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.working = WorkingImage()
        self.heartbeats = BrokerHeartbeats(TIMEOUT)
        self.now = 0
        self.end = 0  # the log end offset
        self.epoch = 1
        self.generations: dict[int, int] = {}
        self.topics = 0
        self.blocks: list[tuple[int, int]] = []
        self.append(ControllerResult.of(bootstrap_records(), None))

    @property
    def image(self) -> MetadataImage:
        return self.working.image

    def append(self, result: ControllerResult[Any]) -> Any:
        before = self.image
        if result.records:
            self.working.append(result.records, self.end, self.epoch)
            check_new_records(before, result, self.end)
            self.end += len(result.records)
        self.working.commit(self.end)
        check_leaders(self.image)
        return result.response

    # ---- steps ------------------------------------------------------------------------------

    def register(self, broker_id: int) -> None:
        generation = self.generations.get(broker_id, 0)
        if self.rng.random() < 0.5:
            generation += 1
        self.generations[broker_id] = generation
        req = request(62, 4, broker_id=broker_id, cluster_id=SETTINGS.cluster_id,
                      incarnation_id=incarnation(broker_id, generation),
                      listeners=[{"name": "PLAINTEXT", "host": "h", "port": 1,
                                  "security_protocol": 0}],
                      features=[{"name": "metadata.version", "min_supported_version": 1,
                                 "max_supported_version": MV}],
                      rack=self.rng.choice([None, "a", "b"]))
        self.append(register_broker(self.image, req, self.heartbeats, settings=SETTINGS,
                                    now_ms=self.now, next_offset=self.end))

    def heartbeat(self, broker_id: int) -> None:
        registered = self.image.broker(broker_id)
        epoch = registered.epoch if registered is not None else 0
        if self.rng.random() < 0.1:
            epoch -= 1
        register_offset = self.working.register_offset(broker_id)
        offset = self.rng.randint(max((register_offset or 0) - 3, 0), self.end)
        req = request(63, 2, broker_id=broker_id, broker_epoch=epoch,
                      current_metadata_offset=offset,
                      want_fence=self.rng.random() < 0.1,
                      want_shut_down=self.rng.random() < 0.15)
        self.append(broker_heartbeat(self.image, req, self.heartbeats, settings=SETTINGS,
                                     now_ms=self.now, next_offset=self.end,
                                     register_offset=register_offset))

    def tick(self) -> None:
        self.now += self.rng.randint(0, TIMEOUT)
        while True:
            fenced = self.append(fence_stale_broker(self.image, self.heartbeats,
                                                    settings=SETTINGS, now_ms=self.now))
            if fenced is None:
                return

    def create_topic(self) -> None:
        self.topics += 1
        req = request(19, 7, topics=[{
            "name": f"t{self.topics}", "num_partitions": self.rng.randint(1, 4),
            "replication_factor": self.rng.randint(1, 3), "assignments": [],
            "configs": [{"name": "unclean.leader.election.enable", "value": "true"}]
            if self.rng.random() < 0.3 else []}],
            timeout=1000, validate_only=False)
        self.append(create_topics(self.image, req, settings=SETTINGS, random=self.rng))

    def grow_topic(self) -> None:
        names = sorted(self.image.topics_by_name)
        if names:
            name = self.rng.choice(names)
            count = len(self.image.topic(name).partitions) + self.rng.randint(1, 2)
            req = request(37, 3, topics=[{"name": name, "count": count, "assignments": None}],
                          timeout=1000, validate_only=False)
            self.append(create_partitions(self.image, req, random=self.rng))

    def delete_topic(self) -> None:
        names = sorted(self.image.topics_by_name)
        if names:
            req = request(20, 6, topics=[{"name": self.rng.choice(names), "topic_id": None}],
                          timeout=1000)
            self.append(delete_topics(self.image, req, settings=SETTINGS))

    def elect(self) -> None:
        election = self.rng.choice([PREFERRED, UNCLEAN])
        req = request(43, 2, election_type=election, topic_partitions=None, timeout=1000)
        self.append(elect(self.image, req))
        self.append(balance_partition_leaders(self.image, settings=SETTINGS))
        self.append(elect_unclean_leaders(self.image, settings=SETTINGS))

    def unregister(self, broker_id: int) -> None:
        self.append(unregister_broker(self.image, request(64, 0, broker_id=broker_id),
                                      self.heartbeats, settings=SETTINGS))

    def allocate(self, broker_id: int) -> None:
        registered = self.image.broker(broker_id)
        epoch = registered.epoch if registered is not None else 0
        req = request(67, 0, broker_id=broker_id, broker_epoch=epoch)
        response = self.append(allocate_producer_ids(self.image, req))
        if response.error_code == ErrorCode.none:
            block = (response.producer_id_start,
                     response.producer_id_start + response.producer_id_len)
            assert all(block[0] >= end or block[1] <= start for start, end in self.blocks)
            self.blocks.append(block)

    def step(self) -> None:
        if self.rng.random() < 0.1:
            self.end += 1  # a raft control record (a new leader's epoch start)
            self.epoch += 1
        broker_id = self.rng.choice(BROKERS)
        action = self.rng.choices(
            ["register", "heartbeat", "tick", "create", "grow", "delete", "elect",
             "unregister", "allocate"], weights=[3, 12, 2, 3, 1, 1, 1, 0.5, 1])[0]
        if action in ("register", "heartbeat", "unregister", "allocate"):
            getattr(self, action)(broker_id)
        else:
            {"tick": self.tick, "create": self.create_topic, "grow": self.grow_topic,
             "delete": self.delete_topic, "elect": self.elect}[action]()


def active(image: MetadataImage, broker_id: int) -> bool:
    broker = image.broker(broker_id)
    return broker is not None and broker.is_active


def check_leaders(image: MetadataImage) -> None:
    for topic in image.topics.values():
        for partition_id, partition in topic.partitions.items():
            where = f"{topic.name}-{partition_id} {partition}"
            if partition.leader != -1:
                assert active(image, partition.leader), where
                assert partition.leader in partition.isr, where
            else:
                assert not any(active(image, r) for r in partition.isr), where


def check_new_records(before: MetadataImage, result: ControllerResult[Any],
                      base_offset: int) -> None:
    usable = [b for b in before.brokers.values() if not b.in_controlled_shutdown]
    unfenced = sum(1 for b in usable if not b.fenced)
    one_rack = len({b.rack for b in usable}) == 1
    for index, record in enumerate(result.records):
        if isinstance(record, PartitionRecord):
            assert active(before, record.leader)
            assert all(active(before, r) for r in record.isr)
            if one_rack and any(before.brokers[r].fenced for r in record.replicas):
                assert unfenced < len(record.replicas)  # racks first, then unfenced brokers
        if isinstance(record, RegisterBrokerRecord):
            previous = before.broker(record.broker_id)
            if previous is None or previous.incarnation_id != record.incarnation_id:
                assert record.broker_epoch == base_offset + index
                assert record.fenced


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_cluster_histories_keep_the_controllers_invariants(seed: int) -> None:
    cluster = Cluster(random.Random(seed))
    for _ in range(80):
        cluster.step()
    image = cluster.image
    data = write_snapshot(image, now_ms=cluster.now, last_contained_log_time_ms=cluster.now)
    assert read_snapshot(data, *snapshot_id(image)) == image


def test_histories_reach_the_interesting_states() -> None:
    """The random histories above do unfence brokers, lead partitions and shut brokers down."""
    seen = {"unfenced": 0, "led": 0, "shutting down": 0, "leaderless": 0}
    for seed in range(20):
        cluster = Cluster(random.Random(seed))
        for _ in range(80):
            cluster.step()
            image = cluster.image
            seen["unfenced"] += any(not b.fenced for b in image.brokers.values())
            seen["shutting down"] += any(b.in_controlled_shutdown for b in image.brokers.values())
            partitions = [p for t in image.topics.values() for p in t.partitions.values()]
            seen["led"] += any(p.leader != -1 for p in partitions)
            seen["leaderless"] += any(p.leader == -1 for p in partitions)
    assert all(count > 20 for count in seen.values()), seen
