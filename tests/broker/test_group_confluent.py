"""Consumer groups with confluent-kafka (librdkafka) against the real broker process: range and
cooperative-sticky rebalances, a member leaving, a member SIGKILLed, static membership."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.broker.group.group_metadata_records import (
    GroupMetadataKey,
    decode_group_metadata_value,
    decode_key,
)
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from tests.broker_process import BrokerProcess

GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000"}
SESSION_MS = 2000
DEADLINE_S = 30.0
PARTITIONS = 6


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("confluent-groups")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", GROUP_CONFIG).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def create_topic(broker: BrokerProcess, partitions: int = PARTITIONS) -> str:
    name = unique("topic")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(timeout=30)
    return name


def produce(broker: BrokerProcess, topic: str, count: int, tag: str = "r") -> set[str]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    values = set()
    for i in range(count):
        value = f"{tag}-{i}"
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
        values.add(value)
    assert producer.flush(30) == 0
    return values


def consumer(broker: BrokerProcess, group: str, **settings: Any) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200,
                     **settings})


class Tracker:
    """Polls consumers, commits what each consumed, and records every value and callback."""

    def __init__(self, *consumers: Consumer) -> None:
        self.consumers = list(consumers)
        self.values: list[str] = []
        self.commit_errors: list[str] = []

    def poll_once(self) -> None:
        for c in self.consumers:
            messages = c.consume(num_messages=500, timeout=0.05)
            for m in messages:
                assert m.error() is None, m.error()
                self.values.append(m.value().decode())
            if messages:
                try:
                    c.commit(asynchronous=False)
                except KafkaException as e:  # a rebalance started: the next owner re-reads
                    self.commit_errors.append(e.args[0].name())

    def until(self, condition: Callable[[], bool], what: str,
              timeout_s: float = DEADLINE_S) -> float:
        started = time.monotonic()
        while not condition():
            assert time.monotonic() - started < timeout_s, f"timed out waiting for {what}"
            self.poll_once()
        return time.monotonic() - started


def partitions_of(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                 timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        reader.close()


def end_offsets(broker: BrokerProcess, topic: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("w")})
    try:
        return {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        reader.close()


def test_two_consumers_split_partitions_and_one_takes_over_on_close(
        group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("g")
    c1, c2 = consumer(group_broker, group), consumer(group_broker, group)
    c1.subscribe([topic])
    c2.subscribe([topic])
    tracker = Tracker(c1, c2)
    tracker.until(lambda: len(partitions_of(c1)) == len(partitions_of(c2)) == 3,
                  "a 3/3 split")
    assert partitions_of(c1) | partitions_of(c2) == set(range(PARTITIONS))
    sent = produce(group_broker, topic, 600)
    tracker.until(lambda: len(tracker.values) >= 600, "600 records")
    c1.close()
    tracker.consumers = [c2]
    took_over = tracker.until(lambda: len(partitions_of(c2)) == PARTITIONS, "the takeover")
    assert took_over < SESSION_MS / 1000  # LeaveGroup: no need to wait for the session
    sent |= produce(group_broker, topic, 120, tag="late")
    tracker.until(lambda: len(tracker.values) >= 720, "the late records")
    c2.close()
    assert sorted(tracker.values) == sorted(sent)  # everything once, nothing twice
    assert committed(group_broker, group, topic) == end_offsets(group_broker, topic)


CHILD = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    bootstrap, group, topic, session = sys.argv[1:5]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": int(session), "heartbeat.interval.ms": 200})
    def on_assign(consumer, partitions):
        print(json.dumps({"assigned": [p.partition for p in partitions]}), flush=True)
    c.subscribe([topic], on_assign=on_assign)
    while True:
        messages = c.consume(num_messages=20, timeout=0.1)
        if messages:  # reported before the commit: a kill in between loses nothing
            print(json.dumps({"consumed": [m.value().decode() for m in messages]}),
                  flush=True)
            c.commit(asynchronous=False)
""")


class ChildConsumer:
    """A consumer in a child process (so it can be SIGKILLed) reporting on stdout."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, broker.bootstrap, group, topic, str(SESSION_MS)],
            stdout=subprocess.PIPE, text=True)
        self.assigned: set[int] = set()
        self.consumed: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = set(event["assigned"])
            else:
                self.consumed += event["consumed"]

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)


def test_a_sigkilled_consumer_is_replaced_after_the_session_timeout(
        group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("g")
    child = ChildConsumer(group_broker, group, topic)
    try:
        survivor = consumer(group_broker, group)
        survivor.subscribe([topic])
        tracker = Tracker(survivor)
        tracker.until(lambda: len(child.assigned) == len(partitions_of(survivor)) == 3,
                      "a 3/3 split with the child")
        sent = produce(group_broker, topic, 600)
        tracker.until(lambda: len(child.consumed) >= 60, "the child to consume")
    finally:
        child.kill()
    took_over = tracker.until(lambda: len(partitions_of(survivor)) == PARTITIONS,
                              "the takeover after SIGKILL")
    assert took_over > (SESSION_MS - 500) / 1000  # no LeaveGroup: the session had to expire
    tracker.until(lambda: set(tracker.values) | set(child.consumed) >= sent, "every record")
    tracker.until(lambda: committed(group_broker, group, topic) ==
                  end_offsets(group_broker, topic), "the final commits")
    survivor.close()


def test_cooperative_sticky_moves_only_what_it_must(group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("g")
    events: dict[str, list[tuple[str, set[int]]]] = {"c1": [], "c2": []}

    def callbacks(name: str) -> dict[str, Any]:
        def record(kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
            return lambda _c, parts: events[name].append((kind, {p.partition for p in parts}))
        return {"on_assign": record("assign"), "on_revoke": record("revoke")}

    settings = {"partition.assignment.strategy": "cooperative-sticky"}
    c1 = consumer(group_broker, group, **settings)
    c1.subscribe([topic], **callbacks("c1"))
    tracker = Tracker(c1)
    tracker.until(lambda: len(partitions_of(c1)) == PARTITIONS, "c1 to own everything")
    owned_alone = partitions_of(c1)
    c2 = consumer(group_broker, group, **settings)
    c2.subscribe([topic], **callbacks("c2"))
    tracker.consumers.append(c2)
    tracker.until(lambda: len(partitions_of(c1)) == len(partitions_of(c2)) == 3,
                  "the cooperative 3/3 split")
    revoked = [parts for kind, parts in events["c1"] if kind == "revoke"]
    assert revoked == [partitions_of(c2)]  # one incremental revocation of exactly those 3
    assert partitions_of(c1) < owned_alone
    sent = produce(group_broker, topic, 120)
    tracker.until(lambda: sorted(tracker.values) == sorted(sent), "every record once")
    c1.close()
    c2.close()


def latest_generation(broker: BrokerProcess, group: str) -> int:
    """The generation in the group's newest GroupMetadata record, read from the log with a
    plain consumer: the records are in Kafka's format."""
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("reader"),
                       "enable.auto.commit": False})
    partition = partition_for(group, 50)
    try:
        end = reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, partition),
                                           timeout=10)[1]
        reader.assign([TopicPartition(OFFSETS_TOPIC, partition, 0)])
        generation, position = -1, 0
        while position < end:
            for m in reader.consume(num_messages=500, timeout=1):
                position = m.offset() + 1
                key = decode_key(m.key())
                if key == GroupMetadataKey(group) and m.value() is not None:
                    generation = decode_group_metadata_value(m.value()).generation
        return generation
    finally:
        reader.close()


def member_ids(broker: BrokerProcess, group: str) -> dict[str | None, str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {m.group_instance_id: m.member_id for m in described.members}


def test_static_member_restart_keeps_its_partitions_without_rebalance(
        group_broker: BrokerProcess) -> None:
    topic, group = create_topic(group_broker), unique("static")
    session = {"session.timeout.ms": 10_000}
    calls: list[str] = []
    c1 = consumer(group_broker, group, **{"group.instance.id": "one"}, **session)
    c2 = consumer(group_broker, group, **{"group.instance.id": "two"}, **session)
    c1.subscribe([topic])
    c2.subscribe([topic], on_assign=lambda *_: calls.append("assign"),
                 on_revoke=lambda *_: calls.append("revoke"))
    tracker = Tracker(c1, c2)
    tracker.until(lambda: len(partitions_of(c1)) == len(partitions_of(c2)) == 3,
                  "a 3/3 split")
    before = partitions_of(c1)
    generation = latest_generation(group_broker, group)
    ids = member_ids(group_broker, group)
    calls.clear()
    c1.close()  # a static member sends no LeaveGroup: its place is kept for the session
    assert set(member_ids(group_broker, group)) == {"one", "two"}
    c1 = consumer(group_broker, group, **{"group.instance.id": "one"}, **session)
    c1.subscribe([topic])
    tracker.consumers = [c1, c2]
    tracker.until(lambda: partitions_of(c1) == before, "the restarted member's partitions")
    sent = produce(group_broker, topic, 60)
    tracker.until(lambda: sorted(tracker.values) == sorted(sent), "every record")
    assert calls == []  # the other member saw no rebalance
    assert latest_generation(group_broker, group) == generation
    after = member_ids(group_broker, group)
    assert after["two"] == ids["two"] and after["one"] != ids["one"]
    c1.close()
    c2.close()
