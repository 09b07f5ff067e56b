"""Committed offsets (with their metadata) and group state live in __consumer_offsets: they
survive a clean broker restart and a SIGKILL of the broker, with real clients on both sides."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000"}
PARTITIONS = 3
DEADLINE_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def setup_topic(broker: BrokerProcess, records: int) -> str:
    name = unique("topic")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS)])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(records):
        producer.produce(name, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return name


def commit_with_metadata(broker: BrokerProcess, group: str, topic: str) -> None:
    """A simple consumer (no subscription: generation -1) commits offsets and metadata."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 10 + p, metadata=f"checkpoint {p}")
                          for p in range(PARTITIONS)], asynchronous=False)
    finally:
        c.close()


def committed(broker: BrokerProcess, group: str, topic: str) -> list[tuple[int, str | None]]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        found = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return [(tp.offset, tp.metadata) for tp in found]
    finally:
        c.close()


def describe(broker: BrokerProcess, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=20)


def poll_until(c: Consumer, condition: Callable[[], bool], what: str,
               seen: list[str] | None = None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for m in c.consume(num_messages=100, timeout=0.1):
            assert m.error() is None, m.error()
            if seen is not None:
                seen.append(m.value().decode())
            c.commit(message=m, asynchronous=False)


EXPECTED = [(10 + p, f"checkpoint {p}") for p in range(PARTITIONS)]


def test_offsets_metadata_and_a_live_group_survive_a_clean_restart(broker_factory: Any
                                                                   ) -> None:
    broker = broker_factory(GROUP_CONFIG)
    topic = setup_topic(broker, 30)
    simple, live = unique("simple"), unique("live")
    commit_with_metadata(broker, simple, topic)
    revoked: list[int] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": live,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 10_000, "heartbeat.interval.ms": 200})
    c.subscribe([topic], on_revoke=lambda _c, parts: revoked.append(len(parts)))
    seen: list[str] = []
    poll_until(c, lambda: len(seen) == 30, "the first records", seen)
    before = describe(broker, live)
    assert before.state.name == "STABLE"

    broker.restart()

    assert committed(broker, simple, topic) == EXPECTED
    after = describe(broker, live)
    assert after.state.name == "STABLE"
    assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30, 60):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    poll_until(c, lambda: len(seen) == 60, "the records after the restart", seen)
    assert sorted(seen) == sorted(f"v{i}" for i in range(60))  # no record twice
    assert revoked == []  # the group carried on: no rebalance
    c.close()
    assert [o for o, _ in committed(broker, live, topic)] == [20] * PARTITIONS


def test_offsets_and_group_state_survive_sigkill_of_the_broker(broker_factory: Any) -> None:
    broker = broker_factory(GROUP_CONFIG)
    topic = setup_topic(broker, 30)
    simple, closed = unique("simple"), unique("closed")
    commit_with_metadata(broker, simple, topic)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": closed,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen: list[str] = []
    poll_until(c, lambda: len(seen) == 30, "every record", seen)
    c.close()  # LeaveGroup: the group is Empty, with its offsets

    broker.kill()
    broker.start()

    assert committed(broker, simple, topic) == EXPECTED
    assert [o for o, _ in committed(broker, closed, topic)] == [10] * PARTITIONS
    group = describe(broker, closed)
    assert (group.state.name, group.members) == ("EMPTY", [])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = {g.group_id for g in admin.list_consumer_groups().result(timeout=20).valid}
    assert {simple, closed} <= listed
