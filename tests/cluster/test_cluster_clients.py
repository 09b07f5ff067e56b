"""A three-node cluster (each node broker and controller, as the README starts them) driven by
real clients: it forms a quorum, registers every broker, and confluent-kafka, kafka-python,
aiokafka and kcat create topics with replication factor 3 through any node and see leaders
spread over the brokers; a request for a partition on a broker that does not lead it gets
NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951), and clients follow it. A group's
coordinator is the leader of its `__consumer_offsets` partition, whichever node is asked, and
consumer groups join, commit and read their offsets through any node; a transaction over
partitions led by every node commits (and aborts) everywhere, offsets included.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from spark_log.protocol import ErrorCode
from tests.broker.raw_client import RawClient
from tests.broker.txn_support import raw_batch
from tests.cluster.cluster_support import create_topic, describe_topic, leaders_of, wait_for
from tests.cluster_process import ClusterProcess

RF = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    running = ClusterProcess(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield running
    finally:
        running.stop()


def test_every_node_sees_all_three_brokers(cluster: ClusterProcess) -> None:
    for node in cluster.nodes:
        brokers = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(
            timeout=10).brokers
        assert sorted(brokers) == [1, 2, 3]
        assert {b.port for b in brokers.values()} == set(cluster.client_ports)


def test_confluent_kafka_creates_through_one_node_and_all_see_it(
        cluster: ClusterProcess) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.nodes[1].bootstrap})
    admin.create_topics([NewTopic("ck-rf3", 6, RF)])["ck-rf3"].result(30)
    for node in cluster.nodes:
        partitions = describe_topic(node.bootstrap, "ck-rf3")
        assert len(partitions) == 6
        assert all(sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
                   for p in partitions.values())
    assert set(leaders_of(cluster.nodes[0].bootstrap, "ck-rf3").values()) == {1, 2, 3}


def test_replication_factor_above_live_brokers_is_refused(cluster: ClusterProcess) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.nodes[2].bootstrap})
    future = admin.create_topics([NewTopic("too-many", 1, 4)])["too-many"]
    with pytest.raises(Exception) as raised:
        future.result(30)
    assert "INVALID_REPLICATION_FACTOR" in str(raised.value.args[0])


def test_kafka_python_creates_through_another_node(cluster: ClusterProcess) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.nodes[2].bootstrap)
    try:
        admin.create_topics([KpNewTopic("kp-rf3", 3, RF)])
    finally:
        admin.close()
    partitions = describe_topic(cluster.nodes[0].bootstrap, "kp-rf3")
    assert sorted(partitions) == [0, 1, 2]
    assert set(leaders_of(cluster.nodes[1].bootstrap, "kp-rf3").values()) == {1, 2, 3}


def test_aiokafka_creates_and_round_trips(cluster: ClusterProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    async def run() -> list[bytes]:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.nodes[0].bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("aio-rf3", 3, RF)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap)
        await producer.start()
        try:
            for n in range(3):
                await producer.send_and_wait("aio-rf3", f"v{n}".encode(), partition=n)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-rf3", bootstrap_servers=cluster.nodes[2].bootstrap,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < 3:
                    batch = await consumer.getmany(timeout_ms=1000)
                    got += [r.value for records in batch.values() for r in records]
            return got
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(run())) == [b"v0", b"v1", b"v2"]
    assert set(leaders_of(cluster.nodes[0].bootstrap, "aio-rf3").values()) == {1, 2, 3}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by ./dev setup")
def test_kcat_lists_brokers_and_leaders(cluster: ClusterProcess) -> None:
    create_topic(cluster.nodes[0].bootstrap, "kcat-rf3", 3)
    out = subprocess.run(["kcat", "-b", cluster.nodes[1].bootstrap, "-L", "-J", "-t",
                          "kcat-rf3"], check=True, capture_output=True, timeout=60).stdout
    listing = json.loads(out)
    assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
    (topic,) = listing["topics"]
    assert {p["leader"] for p in topic["partitions"]} == {1, 2, 3}
    assert all(len(p["replicas"]) == RF for p in topic["partitions"])


def test_produce_to_a_follower_names_the_leader(cluster: ClusterProcess) -> None:
    create_topic(cluster.nodes[0].bootstrap, "routed", 1)
    leader = leaders_of(cluster.nodes[0].bootstrap, "routed")[0]
    follower = next(n for n in range(1, 4) if n != leader)
    with RawClient(cluster.nodes[follower - 1].bootstrap) as raw:
        response = raw.request(0, 10, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "routed", "partition_data": [
                {"index": 0, "records": raw_batch([b"x"])}]}]})
    (topic,) = response.responses
    (partition,) = topic.partition_responses
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert partition.current_leader.leader_id == leader
    assert partition.current_leader.leader_epoch >= 0
    assert [(e.node_id, e.port) for e in response.node_endpoints] == \
        [(leader, cluster.client_ports[leader - 1])]


def test_clients_follow_leaders_across_nodes(cluster: ClusterProcess) -> None:
    """A producer bootstrapped with one node writes to partitions led by all three, and a
    consumer bootstrapped with another reads everything back in order."""
    create_topic(cluster.nodes[0].bootstrap, "spread", 3)
    producer = Producer({"bootstrap.servers": cluster.nodes[0].bootstrap, "acks": "all"})
    for n in range(30):
        producer.produce("spread", f"v{n}".encode(), partition=n % 3)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.nodes[2].bootstrap, "group.id": "spread",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("spread", p, 0) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got[message.partition()].append(message.value())
    consumer.close()
    for p in range(3):
        assert got[p] == [f"v{n}".encode() for n in range(p, 30, 3)]


def test_metadata_is_the_same_on_every_node(cluster: ClusterProcess) -> None:
    create_topic(cluster.nodes[1].bootstrap, "same-everywhere", 4)
    views = [leaders_of(node.bootstrap, "same-everywhere") for node in cluster.nodes]
    assert wait_for(lambda: all(v == views[0] for v in
                                (leaders_of(n.bootstrap, "same-everywhere")
                                 for n in cluster.nodes)), 10)
    assert len(views[0]) == 4


def test_topic_data_lives_on_the_leader(cluster: ClusterProcess) -> None:
    """Each partition's log is opened on every replica (the broker hosts what the metadata
    assigns it)."""
    create_topic(cluster.nodes[0].bootstrap, "hosted", 2)
    for node in cluster.nodes:
        assert wait_for(lambda node=node: all(
            (Path(node.data_dir) / f"hosted-{p}").is_dir() for p in range(2)), 10)


def coordinator_of(bootstrap: str, group: str) -> int:
    with RawClient(bootstrap) as raw:
        found = raw.request(10, 3, {"key": group, "key_type": 0})
    assert found.error_code == ErrorCode.none, found
    return found.node_id


def test_a_groups_coordinator_is_the_leader_of_its_offsets_partition(
        cluster: ClusterProcess) -> None:
    groups = [f"coordinated-{i}" for i in range(12)]
    coordinator_of(cluster.nodes[0].bootstrap, groups[0])  # creates __consumer_offsets
    leaders = leaders_of(cluster.bootstrap, OFFSETS_TOPIC)
    answers = {g: {coordinator_of(node.bootstrap, g) for node in cluster.nodes} for g in groups}
    for group, named in answers.items():
        assert named == {leaders[partition_for(group, len(leaders))]}, (group, named)
    assert len(set().union(*answers.values())) >= 2  # coordinators spread over the nodes


def test_consumer_groups_work_through_any_node(cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "grouped", 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(30):
        producer.produce("grouped", value=b"%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    for n, node in enumerate(cluster.nodes):
        group = f"grouped-{n}"
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["grouped"])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 30 and time.monotonic() < deadline:  # join, sync, fetch
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 30
        consumer.commit(asynchronous=False)
        consumer.close()
        other = cluster.nodes[(n + 1) % 3].bootstrap  # read back through another node
        reader = Consumer({"bootstrap.servers": other, "group.id": group})
        committed = reader.committed([TopicPartition("grouped", p) for p in range(3)], 30)
        reader.close()
        assert [tp.offset for tp in committed] == [10, 10, 10], (group, committed)


def test_transactions_span_partitions_led_by_every_node(cluster: ClusterProcess) -> None:
    """A transactional producer writes to partitions led by all three nodes and commits a
    group's offsets with them: its coordinator (the leader of its __transaction_state
    partition) sends the markers to every leader; read_committed consumers see the committed
    transaction only, and the group sees its offsets."""
    create_topic(cluster.bootstrap, "txn-out", 3)
    assert set(leaders_of(cluster.bootstrap, "txn-out").values()) == {1, 2, 3}
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": "spread-txn"})
    producer.init_transactions(30)
    with RawClient(cluster.nodes[2].bootstrap) as raw:
        found = raw.request(10, 3, {"key": "spread-txn", "key_type": 1})
    assert found.error_code == ErrorCode.none
    txn_leaders = leaders_of(cluster.bootstrap, "__transaction_state")
    assert found.node_id == txn_leaders[partition_for("spread-txn", len(txn_leaders))]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "txn-group",
                         "enable.auto.commit": False})
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for partition in range(3):
            producer.produce("txn-out", value=outcome.encode(), partition=partition)
        producer.send_offsets_to_transaction(
            [TopicPartition("txn-out", 0, 42 if outcome == "commit" else 99)],
            consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "txn-reader",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition("txn-out", p) for p in range(3)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 3 and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            values.append((message.partition(), message.value()))
    extra = reader.poll(2)  # nothing of the aborted transaction follows
    reader.close()
    assert sorted(values) == [(0, b"commit"), (1, b"commit"), (2, b"commit")]
    assert extra is None or extra.error() is not None
    committed = consumer.committed([TopicPartition("txn-out", 0)], 30)
    consumer.close()
    assert committed[0].offset == 42
