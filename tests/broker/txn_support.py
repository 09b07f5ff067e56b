"""Helpers shared by the idempotence and transaction tests: topics, raw produce requests,
read_committed / read_uncommitted reads, and waiting for conditions (never fixed sleeps)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.protocol.api_keys import ApiKey
from spark_log.records import Record, build_batch
from tests.broker.raw_client import RawClient

PRODUCE_V = 9
# Small coordinator topics and a fast timeout check keep broker starts and tests quick.
TXN_BROKER_CONFIG = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def wait_until(condition: Callable[[], Any], timeout_s: float = 60, what: str = "condition"
               ) -> Any:
    """Poll `condition` until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def raw_batch(values: list[bytes], *, producer_id: int = -1, epoch: int = -1,
              sequence: int = -1, transactional: bool = False) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, now, None, v) for i, v in enumerate(values)],
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=transactional)


def raw_produce(client: RawClient, topic: str, records: bytes, partition: int = 0,
                transactional_id: str | None = None) -> Any:
    response = client.request(ApiKey.PRODUCE, PRODUCE_V, {
        "transactional_id": transactional_id, "acks": -1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    return response.responses[0].partition_responses[0]


def read_values(bootstrap: str, topic: str, partitions: int = 1, *,
                committed: bool = True, idle_s: float = 2.0, expect: int | None = None,
                timeout_s: float = 120) -> list[bytes]:
    """Every value in `topic` from the start, in partition order: until `expect` values came
    (then one more idle period to catch extras) or nothing new arrived for `idle_s`."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("reader"),
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(1000, 0.2)
            for m in messages:
                assert m.error() is None, m.error()
                values.append(m.value())
            if messages:
                last_new = time.monotonic()
            waited = time.monotonic() - last_new
            if (expect is None or len(values) >= expect) and waited > idle_s:
                break
    finally:
        consumer.close()
    return values


def list_offset(client: RawClient, topic: str, committed: bool, partition: int = 0) -> int:
    """ListOffsets(latest) under read_committed (the LSO) or read_uncommitted (the HW)."""
    response = client.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 1 if committed else 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return response.topics[0].partitions[0].offset
