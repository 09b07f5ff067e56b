"""Data replication on three real nodes: followers copy their leaders byte for byte, consumers
see only what every in-sync replica has, acks=all survives the leader's SIGKILL, and the two
KIP-101 scenarios end with identical replicas."""

from __future__ import annotations

import select
import signal
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.protocol import ErrorCode, decode_response, encode_request, spec_for
from spark_log.protocol.entity_build import build
from spark_log.records import Record, build_batch
from tests.broker.damage_support import read_all
from tests.broker.raw_client import RawClient
from tests.cluster.cluster_support import create_topic, describe_topic, wait_for
from tests.cluster.replication_support import (
    acks_all_producer,
    await_identical,
    await_leader,
    leader_of,
    produce_acked,
    replica_bytes,
)
from tests.cluster_process import ClusterProcess

LAG_TIME_MS = 3000  # replica.lag.time.max.ms here: a stopped follower leaves the ISR quickly


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    running = ClusterProcess(tmp_path_factory.mktemp("replication"), config={
        "replica.lag.time.max.ms": str(LAG_TIME_MS)}).start()
    try:
        yield running
    finally:
        running.stop()


def test_followers_hold_the_leaders_bytes(cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "copied", 3)
    producer = acks_all_producer(cluster.bootstrap)
    for partition in range(3):
        acked = produce_acked(producer, "copied", partition,
                              [f"{partition}-{i}".encode() for i in range(200)])
        assert [o for _, o in acked] == list(range(200))
    for partition in range(3):
        await_identical(cluster, "copied", partition, [1, 2, 3])
        described = describe_topic(cluster.bootstrap, "copied")[partition]
        assert sorted(described.isrs) == [1, 2, 3]


def test_consumers_see_only_what_every_in_sync_replica_has(cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "watermark", 1)
    producer = acks_all_producer(cluster.bootstrap)
    produce_acked(producer, "watermark", 0, [b"before"])
    leader = leader_of(cluster.bootstrap, "watermark", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    stopped = cluster.nodes[follower - 1].proc
    assert stopped is not None
    stopped.send_signal(signal.SIGSTOP)  # in the ISR, but fetching nothing
    try:
        quick = acks_all_producer(cluster.bootstrap, acks="1", **{"enable.idempotence": False})
        acked = produce_acked(quick, "watermark", 0, [b"pending"])
        assert acked == [(b"pending", 1)]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("watermark", 0, 1)])
        deadline = time.monotonic() + 1.0  # well inside replica.lag.time.max.ms
        seen = []
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert seen == [], "a record not yet on every ISR member was visible"
    finally:
        stopped.send_signal(signal.SIGCONT)
    got = []

    def read_pending() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
        return got == [b"pending"]

    assert wait_for(read_pending, 30)
    consumer.close()


def test_acknowledged_records_survive_the_leaders_sigkill(cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "survivor", 1)
    producer = acks_all_producer(cluster.bootstrap)
    acked = produce_acked(producer, "survivor", 0, [f"a{i}".encode() for i in range(500)])
    leader = leader_of(cluster.bootstrap, "survivor", 0)
    cluster.nodes[leader - 1].kill()
    try:
        new_leader = await_leader(cluster.bootstrap, "survivor", 0, {leader})
        acked += produce_acked(producer, "survivor", 0, [f"b{i}".encode() for i in range(100)])
    finally:
        cluster.nodes[leader - 1].start()
    read = read_all(cluster.bootstrap, "survivor", committed=False)
    assert [(v, o) for o, v in read] == acked
    assert new_leader != leader
    await_identical(cluster, "survivor", 0, [1, 2, 3])


def test_kip101_leader_change_during_follower_restart(cluster: ClusterProcess) -> None:
    """KIP-101 scenario 1: a follower restarts (its high watermark behind its log end) and the
    leader dies right after; nothing acknowledged is lost and the replicas end identical."""
    create_topic(cluster.bootstrap, "kip101-restart", 1)
    producer = acks_all_producer(cluster.bootstrap)
    acked = produce_acked(producer, "kip101-restart", 0, [f"m{i}".encode() for i in range(300)])
    leader = leader_of(cluster.bootstrap, "kip101-restart", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    cluster.nodes[follower - 1].kill()
    cluster.nodes[follower - 1].start()
    cluster.nodes[leader - 1].kill()
    try:
        await_leader(cluster.bootstrap, "kip101-restart", 0, {leader})
        acked += produce_acked(producer, "kip101-restart", 0,
                               [f"n{i}".encode() for i in range(100)])
    finally:
        cluster.nodes[leader - 1].start()
    read = read_all(cluster.bootstrap, "kip101-restart", committed=False)
    assert [(v, o) for o, v in read] == acked
    await_identical(cluster, "kip101-restart", 0, [1, 2, 3])


def test_kip101_every_replica_crashes_at_once(cluster: ClusterProcess) -> None:
    """KIP-101 scenario 2: every replica crashes together and comes back; the one elected
    leads, the others truncate to where they diverge from it, and all end identical."""
    create_topic(cluster.bootstrap, "kip101-crash", 1)
    producer = acks_all_producer(cluster.bootstrap)
    acked = produce_acked(producer, "kip101-crash", 0, [f"x{i}".encode() for i in range(300)])
    producer.flush(10)
    for node in cluster.nodes:
        node.kill()
    for node in cluster.nodes:
        node.launch()
    for node in cluster.nodes:
        node.await_ready()
    await_leader(cluster.bootstrap, "kip101-crash", 0, set())
    producer = acks_all_producer(cluster.bootstrap)
    acked += produce_acked(producer, "kip101-crash", 0, [f"y{i}".encode() for i in range(100)])
    read = read_all(cluster.bootstrap, "kip101-crash", committed=False)
    assert [(v, o) for o, v in read] == acked
    await_identical(cluster, "kip101-crash", 0, [1, 2, 3])


def test_acks_all_refused_below_min_insync_replicas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Five nodes (so the controller quorum outlives two of them), a topic on nodes 1-3 with
    min.insync.replicas=2: with two of its three brokers down acks=all is refused and nothing
    acknowledged; when one returns, writes resume."""
    five = ClusterProcess(tmp_path, size=5).start()
    try:
        admin = AdminClient({"bootstrap.servers": five.bootstrap})
        admin.create_topics([NewTopic("guarded", 1, replica_assignment=[[1, 2, 3]],
                                      config={"min.insync.replicas": "2"})])["guarded"].result(30)
        producer = acks_all_producer(five.bootstrap, **{"message.timeout.ms": 5000})
        produce_acked(producer, "guarded", 0, [b"ok"])
        five.nodes[1].kill()
        five.nodes[2].kill()
        assert wait_for(lambda: describe_topic(five.bootstrap, "guarded")[0].isrs == [1], 30)
        with RawClient(five.nodes[0].bootstrap) as raw:
            answer = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [{
                "name": "guarded", "partition_data": [{
                    "index": 0, "records": build_batch([Record(0, 0, None, b"refused")])}]}]})
        (topic,) = answer.responses
        assert topic.partition_responses[0].error_code == ErrorCode.not_enough_replicas
        failures = []
        producer.produce("guarded", b"refused too", partition=0,
                         on_delivery=lambda err, msg: failures.append(err))
        producer.flush(30)
        assert len(failures) == 1 and failures[0] is not None  # never acknowledged
        five.nodes[1].start()
        assert wait_for(lambda: sorted(describe_topic(five.bootstrap, "guarded")[0].isrs)
                        == [1, 2], 30), five.logs()[-12000:]
        producer = acks_all_producer(five.bootstrap)
        produce_acked(producer, "guarded", 0, [b"resumed"])
        values = [v for _, v in read_all(five.bootstrap, "guarded", committed=False)]
        assert values == [b"ok", b"resumed"]
    finally:
        five.stop()


def test_a_connection_goes_on_while_acks_all_waits_and_answers_in_order(
        cluster: ClusterProcess) -> None:
    """Produce requests sent back to back, each waiting for a stopped ISR member: the leader
    appends the later ones meanwhile (their offsets follow in request order) and, once the
    member resumes, answers all of them, and a request behind them, in request order."""
    create_topic(cluster.bootstrap, "pipelined", 1)
    leader = leader_of(cluster.bootstrap, "pipelined", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    stopped = cluster.nodes[follower - 1].proc
    assert stopped is not None
    produce = spec_for(0)
    versions = spec_for(18)
    assert produce is not None and versions is not None
    with RawClient(cluster.nodes[leader - 1].bootstrap) as raw:
        raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        stopped.send_signal(signal.SIGSTOP)
        try:
            batches = [build_batch([Record(0, 0, None, v)]) for v in (b"first", b"second")]
            for correlation, records in zip((101, 102), batches, strict=True):
                raw.sock.sendall(encode_request(correlation, "raw-test", build(
                    produce.request_type(9), {"acks": -1, "timeout": 30000, "topic_data": [{
                        "name": "pipelined", "partition_data": [{
                            "index": 0, "records": records}]}]})))
            raw.sock.sendall(encode_request(103, "raw-test", build(versions.request_type(3), {
                "client_software_name": "t", "client_software_version": "1"})))
            # The second append does not wait for the first's answer.
            assert wait_for(lambda: len(replica_bytes(cluster, leader, "pipelined", 0))
                            == sum(map(len, batches)), 10)
            readable, _, _ = select.select([raw.sock], [], [], 0.5)
            assert readable == [], "answered before the stopped ISR member had the records"
            log = describe_topic(cluster.bootstrap, "pipelined")[0]
            assert follower in log.isrs
        finally:
            stopped.send_signal(signal.SIGCONT)
        answers = [decode_response(raw.read_frame(), key, version)
                   for key, version in ((0, 9), (0, 9), (18, 3))]
    assert [correlation for correlation, _ in answers] == [101, 102, 103]
    offsets = [a.responses[0].partition_responses[0].base_offset for _, a in answers[:2]]
    assert offsets == [0, 1]
    assert all(a.responses[0].partition_responses[0].error_code == ErrorCode.none
               for _, a in answers[:2])
