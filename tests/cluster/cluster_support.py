"""Small helpers for cluster tests: topic descriptions and leaders as confluent-kafka's
metadata shows them, the active controller as DescribeQuorum names it, and bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.metadata.metadata_topic import METADATA_PARTITION, METADATA_TOPIC
from spark_log.protocol import ErrorCode
from tests.broker.raw_client import RawClient

METADATA_TOPIC_PARTITION = {"topic_name": METADATA_TOPIC, "partitions": [
    {"partition_index": METADATA_PARTITION}]}


def describe_topic(bootstrap: str, topic: str) -> dict[int, Any]:
    """Partition id -> confluent-kafka PartitionMetadata (leader, replicas, isrs)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    described = metadata.topics[topic]
    if described.error is not None:
        raise AssertionError(f"{topic}: {described.error}")
    return dict(described.partitions)


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 3
                 ) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result is in
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(30)


def leaders_of(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: d.leader for p, d in describe_topic(bootstrap, topic).items()}


def wait_for(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    """Whether `condition` held within `timeout_s` (polled; for state only visible from
    outside the process under test)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step_s)


def quorum_leader(controller_address: str) -> tuple[int, int]:
    """(leader id, leader epoch) as the controller at `controller_address` describes the
    quorum; (-1, -1) if it does not know or does not lead."""
    with RawClient(controller_address) as raw:
        response = raw.request(55, 1, {"topics": [METADATA_TOPIC_PARTITION]})
    if response.error_code != ErrorCode.none:
        return -1, -1
    (topic,) = response.topics
    (partition,) = topic.partitions
    # A follower answers NOT_LEADER_OR_FOLLOWER with the leader it knows.
    return partition.leader_id, partition.leader_epoch
