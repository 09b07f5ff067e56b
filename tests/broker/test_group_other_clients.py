"""Consumer groups with kafka-python and aiokafka against the real broker process: two members
split a topic, one leaves, the other takes everything over and every record is committed."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError as KpKafkaError

from tests.broker_process import BrokerProcess

GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000"}
PARTITIONS = 6
DEADLINE_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("other-client-groups")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", GROUP_CONFIG).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def create_topic(broker: BrokerProcess) -> str:
    name = unique("topic")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    return name


def produce(broker: BrokerProcess, topic: str, count: int, tag: str) -> set[str]:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    values = {f"{tag}-{i}" for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.send(topic, value=value.encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    return values


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ---- kafka-python -----------------------------------------------------------------------------
class KafkaPythonMember:
    """A kafka-python group member polling and committing in its own thread (its JoinGroup
    blocks while the group waits for the other member)."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=group,
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=3000,
            heartbeat_interval_ms=300)
        # Subscribed, and the topic's metadata loaded, before the first poll joins. kafka-python
        # joins without waiting for it; a leader that assigned nothing then rejoins when the
        # metadata arrives, and (3.0.12) a poll that times out during that rejoin abandons it:
        # the member's heartbeats stay off until the coordinator drops it.
        self.consumer.subscribe([topic])
        assert self.consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
        self.values: list[str] = []
        self.partitions: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batches = self.consumer.poll(timeout_ms=100)
            self.partitions = {tp.partition for tp in self.consumer.assignment()}
            for records in batches.values():
                self.values += [r.value.decode() for r in records]
            if batches:
                # a failure means a rebalance started: the next owner re-reads from the last commit
                with contextlib.suppress(KpKafkaError):
                    self.consumer.commit()
        self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


def test_kafka_python_group_rebalances_and_commits(group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("kpy")
    a = KafkaPythonMember(group_broker, group, topic)
    b = KafkaPythonMember(group_broker, group, topic)
    wait_for(lambda: len(a.partitions) == len(b.partitions) == 3, "a 3/3 split")
    assert a.partitions | b.partitions == set(range(PARTITIONS))
    sent = produce(group_broker, topic, 300, "early")
    wait_for(lambda: len(a.values) + len(b.values) >= 300, "the early records")
    a.close()
    wait_for(lambda: len(b.partitions) == PARTITIONS, "b to take over")
    sent |= produce(group_broker, topic, 60, "late")
    wait_for(lambda: set(a.values) | set(b.values) >= sent, "every record")
    b.close()
    assert sorted(a.values + b.values) == sorted(sent)
    reader = KafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=group,
                           enable_auto_commit=False)
    try:
        partitions = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = reader.end_offsets(partitions)
        assert {tp: reader.committed(tp) for tp in partitions} == ends
    finally:
        reader.close()


# ---- aiokafka ---------------------------------------------------------------------------------
async def aiokafka_member(broker: BrokerProcess, group: str, topic: str, values: list[str],
                          partitions: dict[str, set[int]], name: str,
                          stop: asyncio.Event) -> None:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group,
        auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=3000,
        heartbeat_interval_ms=300)
    await consumer.start()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            partitions[name] = {tp.partition for tp in consumer.assignment()}
            for records in batches.values():
                values += [r.value.decode() for r in records]
            if batches:
                with contextlib.suppress(KafkaError):  # a rebalance started: re-read later
                    await consumer.commit()
    finally:
        await consumer.stop()


async def async_wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_aiokafka_group_rebalances_and_commits(group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("aio")

    async def scenario() -> tuple[list[str], set[str]]:
        values: list[str] = []
        partitions: dict[str, set[int]] = {"a": set(), "b": set()}
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(aiokafka_member(group_broker, group, topic, values,
                                                partitions, "a", stop_a))
        b = asyncio.create_task(aiokafka_member(group_broker, group, topic, values,
                                                partitions, "b", stop_b))
        await async_wait_for(lambda: len(partitions["a"]) == len(partitions["b"]) == 3,
                             "a 3/3 split")
        sent = await asyncio.to_thread(produce, group_broker, topic, 300, "early")
        await async_wait_for(lambda: len(values) >= 300, "the early records")
        stop_a.set()
        await a
        await async_wait_for(lambda: len(partitions["b"]) == PARTITIONS, "b to take over")
        sent |= await asyncio.to_thread(produce, group_broker, topic, 60, "late")
        await async_wait_for(lambda: set(values) >= sent, "every record")
        stop_b.set()
        await b
        return values, sent

    values, sent = asyncio.run(scenario())
    assert sorted(values) == sorted(sent)

    async def committed() -> tuple[dict[int, Any], dict[int, Any]]:
        reader = AIOKafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=group,
                                  enable_auto_commit=False)
        await reader.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
            ends = await reader.end_offsets(tps)
            return ({tp.partition: await reader.committed(tp) for tp in tps},
                    {tp.partition: offset for tp, offset in ends.items()})
        finally:
            await reader.stop()

    commits, ends = asyncio.run(committed())
    assert commits == ends
