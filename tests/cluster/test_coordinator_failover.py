"""Consumer groups and transactions on a replicated cluster while brokers die mid-transaction:
a consume-transform-produce loop (confluent-kafka, read_committed, offsets sent to the
transaction) has the broker leading its group's offsets partition, then its transactional id's
state partition, then its output partition SIGKILLed (and restarted) with a transaction open,
its records and offsets sent; that transaction commits through the new leaders, a new
incarnation of the producer goes on, and the loop ends with every input record transformed
exactly once and the group's committed offset at the end of the input."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.broker.damage_support import read_all
from tests.broker.raw_client import RawClient
from tests.cluster.cluster_support import create_topic, wait_for
from tests.cluster.replication_support import acks_all_producer, leader_of, produce_acked
from tests.cluster.test_cluster_clients import coordinator_of
from tests.cluster_process import ClusterProcess

RECORDS = 300
GROUP = "eos-loop"
TXN_ID = "eos-loop-txn"
BOUND_S = 90.0


@pytest.fixture
def cluster(tmp_path) -> Iterator[ClusterProcess]:  # type: ignore[no-untyped-def]
    running = ClusterProcess(tmp_path, config={
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3"}).start()
    try:
        yield running
    finally:
        running.stop()


def _transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                         "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
    producer.init_transactions(60)
    return producer


def _consumer(bootstrap: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("in", 0)])
    return consumer


def _kill_and_restart(cluster: ClusterProcess, node_id: int) -> None:
    cluster.nodes[node_id - 1].kill()
    cluster.nodes[node_id - 1].start()


def test_transform_loop_is_exactly_once_while_coordinators_die(cluster: ClusterProcess) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "in", 1)
    create_topic(bootstrap, "out", 1)
    produce_acked(acks_all_producer(bootstrap), "in", 0,
                  [f"r{i}".encode() for i in range(RECORDS)])
    producer, consumer = _transactional(bootstrap), _consumer(bootstrap)
    kills = {75: "group", 150: "transaction", 225: "output"}
    done = 0
    attempts = 0
    while done < RECORDS:
        attempts += 1
        assert attempts < 200, "the loop made no progress"
        batch = consumer.consume(50, 5)
        records = [m for m in batch if m.error() is None]
        if not records:
            continue
        try:
            producer.begin_transaction()
            for m in records:
                producer.produce("out", m.value().upper(), partition=0)
            position = [TopicPartition("in", 0, records[-1].offset() + 1)]
            _bounded(producer.send_offsets_to_transaction, position,
                     consumer.consumer_group_metadata(), 30)
            killed = done >= min(kills, default=RECORDS)
            if killed:  # mid-transaction: records, offsets sent
                # (Killed after the offsets are sent, not before: librdkafka's
                # send_offsets_to_transaction can block past its timeout, for good, when the
                # group coordinator it has cached went away: its issues 5456 and 5511.)
                producer.flush(30)
                _kill_and_restart(cluster, _victim(cluster, kills.pop(min(kills))))
            producer.commit_transaction(60)
            done = records[-1].offset() + 1
            if killed:
                # A new incarnation goes on: this one may still cache the killed node as the
                # group's coordinator. While that node was fenced it left the metadata, so
                # librdkafka ended its broker thread, and the next send_offsets_to_transaction
                # would wait for that thread for good (librdkafka 5511; its timeout is never
                # checked, 5456).
                producer = _transactional(bootstrap)
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(60)
            elif not error.retriable():
                producer = _transactional(bootstrap)  # fenced or fatal: a new incarnation
            consumer.close()
            consumer = _consumer(bootstrap)  # back to the last committed position
    consumer.close()
    assert not kills, "not every coordinator was killed"
    out = [v for _, v in read_all(bootstrap, "out")]
    assert out == [f"R{i}".encode() for i in range(RECORDS)]
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        assert wait_for(lambda: checker.committed([TopicPartition("in", 0)], 10)[0].offset
                        == RECORDS, 30)
    finally:
        checker.close()


def _bounded(call: Callable[..., object], *args: object) -> object:
    """`call(*args)` in a thread of its own: a librdkafka call that blocks past its own timeout
    fails this test within BOUND_S instead of holding the whole suite (the test's timeout
    cannot interrupt a C call)."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as e:  # raised again in the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"{call.__name__} did not return within {BOUND_S}s"
    if isinstance(outcome.get("error"), BaseException):
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


def _victim(cluster: ClusterProcess, role: str) -> int:
    """The node now leading the group's offsets partition, the transactional id's state
    partition, or the output partition."""
    address = cluster.nodes[0].bootstrap
    if role == "group":
        return coordinator_of(address, GROUP)
    if role == "transaction":
        return _transaction_coordinator(address)
    return leader_of(cluster.bootstrap, "out", 0)


def _transaction_coordinator(address: str) -> int:
    with RawClient(address) as raw:
        answer = raw.request(10, 4, {"key_type": 1, "coordinator_keys": [TXN_ID]})
    (found,) = answer.coordinators
    assert found.error_code == 0
    return int(found.node_id)
