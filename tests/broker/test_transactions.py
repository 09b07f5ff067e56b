"""Transactions against the real broker process with real clients: visibility under
read_committed, fencing, timeouts, crashes of producers and of the broker, exactly-once
consume-transform-produce under SIGKILL, kafka-python and aiokafka, and ending a transaction
from another connection."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from spark_log.client.transactions import TransactionClient, TransactionError
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from tests.broker.raw_client import RawClient
from tests.broker.txn_support import (
    TXN_BROKER_CONFIG,
    create_topic,
    list_offset,
    raw_batch,
    raw_produce,
    read_values,
    unique,
    wait_until,
)
from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.filterwarnings("ignore:read_text is deprecated"),
              pytest.mark.filterwarnings("ignore:open_text is deprecated")]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("txn")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", TXN_BROKER_CONFIG).start()
    yield proc
    assert proc.stop() == 0, proc.log()


def txn_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.broker.txn_child", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_committed_records_are_visible_and_aborted_ones_only_uncommitted(txn_broker) -> None:  # type: ignore
    topic = unique("vis")
    create_topic(txn_broker.bootstrap, topic)
    producer = txn_producer(txn_broker.bootstrap, unique("vis"))
    for kind in (b"c1", b"a", b"c2"):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, value=kind + b"-%d" % i)
        if kind == b"a":
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    committed = read_values(txn_broker.bootstrap, topic, expect=100, idle_s=0.5)
    assert committed == [k + b"-%d" % i for k in (b"c1", b"c2") for i in range(50)]
    everything = read_values(txn_broker.bootstrap, topic, committed=False, expect=150,
                             idle_s=0.5)
    assert everything == [k + b"-%d" % i for k in (b"c1", b"a", b"c2") for i in range(50)]


def test_an_open_transaction_holds_the_last_stable_offset(txn_broker) -> None:  # type: ignore
    topic = unique("lso")
    create_topic(txn_broker.bootstrap, topic)
    producer = txn_producer(txn_broker.bootstrap, unique("lso"))
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0
    with RawClient(txn_broker.bootstrap) as client:
        assert list_offset(client, topic, committed=False) == 10
        assert list_offset(client, topic, committed=True) == 0
        assert read_values(txn_broker.bootstrap, topic, idle_s=0.5) == []
        producer.commit_transaction(30)
        assert list_offset(client, topic, committed=True) == 11  # the data and the marker
    assert len(read_values(txn_broker.bootstrap, topic, expect=10, idle_s=0.3)) == 10


def test_a_second_producer_with_the_same_id_fences_the_first(txn_broker) -> None:  # type: ignore
    topic = unique("fence")
    create_topic(txn_broker.bootstrap, topic)
    transactional_id = unique("fence")
    old = txn_producer(txn_broker.bootstrap, transactional_id)
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    assert old.flush(30) == 0
    new = txn_producer(txn_broker.bootstrap, transactional_id)  # aborts the old transaction
    new.begin_transaction()
    new.produce(topic, value=b"new")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    assert read_values(txn_broker.bootstrap, topic, expect=1, idle_s=0.5) == [b"new"]


def test_a_killed_producers_transaction_is_aborted_after_its_timeout(txn_broker) -> None:  # type: ignore
    topic = unique("abandon")
    create_topic(txn_broker.bootstrap, topic)
    proc = child("open", txn_broker.bootstrap, topic, unique("abandon"), "20", "4000")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        kill(proc)
    producer = Producer({"bootstrap.servers": txn_broker.bootstrap})
    producer.produce(topic, value=b"after")
    assert producer.flush(30) == 0
    with RawClient(txn_broker.bootstrap) as client:
        assert list_offset(client, topic, committed=True) == 0  # blocked by the open one
        wait_until(lambda: list_offset(client, topic, committed=True) == 22, 30,
                   "the timed-out transaction to be aborted")
    assert read_values(txn_broker.bootstrap, topic, expect=1, idle_s=0.3) == [b"after"]


def test_broker_killed_mid_transaction_shows_no_partial_transaction(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", TXN_BROKER_CONFIG).start()
    try:
        topic = unique("bcrash")
        create_topic(broker.bootstrap, topic, partitions=2)
        producer = txn_producer(broker.bootstrap, unique("bcrash"),
                                **{"transaction.timeout.ms": 2000})
        producer.begin_transaction()
        for i in range(40):
            producer.produce(topic, value=b"done-%d" % i, partition=i % 2)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(40):
            producer.produce(topic, value=b"partial-%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        broker.kill()
        broker.start()
        with RawClient(broker.bootstrap) as client:
            wait_until(lambda: all(list_offset(client, topic, True, p) ==
                                   list_offset(client, topic, False, p) for p in range(2)),
                       30, "the open transaction to be aborted after the restart")
        values = read_values(broker.bootstrap, topic, partitions=2, idle_s=1)
        assert sorted(values) == sorted(b"done-%d" % i for i in range(40))
        written = read_values(broker.bootstrap, topic, partitions=2, committed=False, idle_s=1)
        assert len(written) == 80  # the partial transaction was on disk, and stays hidden
    finally:
        broker.stop()


def test_consume_transform_produce_is_exactly_once_across_sigkills(txn_broker) -> None:  # type: ignore
    records, partitions = 100_000, 3
    source, sink, group = unique("in"), unique("out"), unique("ctp")
    create_topic(txn_broker.bootstrap, source, partitions)
    create_topic(txn_broker.bootstrap, sink, partitions)
    producer = Producer({"bootstrap.servers": txn_broker.bootstrap, "linger.ms": 20})
    for i in range(records):
        producer.produce(source, value=b"%d" % i, partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    args = ("ctp", txn_broker.bootstrap, source, sink, str(partitions), unique("ctp"), group)
    with RawClient(txn_broker.bootstrap) as client:
        def written() -> int:
            return sum(list_offset(client, sink, False, p) for p in range(partitions))

        for threshold in (15_000, 40_000, 70_000):
            proc = child(*args)
            try:
                wait_until(lambda t=threshold: written() >= t, 120, f"{threshold} records")
            finally:
                kill(proc)  # SIGKILL, most likely in the middle of a transaction
        proc = child(*args)
        try:
            values = read_values(txn_broker.bootstrap, sink, partitions, expect=records,
                                 idle_s=2, timeout_s=180)
        finally:
            kill(proc)
    counts = Counter(values)
    assert len(values) == records, f"{len(values)} records, {len(counts)} distinct"
    assert set(counts) == {b"out-%d" % i for i in range(records)}


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed"})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_kafka_python_transactional_producer(txn_broker) -> None:  # type: ignore
    from kafka import KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = unique("kp"), unique("kp-group")
    create_topic(txn_broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=txn_broker.bootstrap,
                             transactional_id=unique("kp"))
    producer.init_transactions()
    for kind, offset in ((b"keep", 5), (b"drop", 9)):
        producer.begin_transaction()
        for i in range(20):
            producer.send(topic, value=kind + b"-%d" % i)
        producer.send_offsets_to_transaction(
            {KafkaTopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}, group)
        if kind == b"keep":
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    assert read_values(txn_broker.bootstrap, topic, expect=20, idle_s=0.5) == \
        [b"keep-%d" % i for i in range(20)]
    assert committed_offset(txn_broker.bootstrap, group, topic) == 5  # the aborted 9 is not


def test_aiokafka_transactional_producer(txn_broker) -> None:  # type: ignore
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic, group = unique("aio"), unique("aio-group")
    create_topic(txn_broker.bootstrap, topic)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap,
                                    transactional_id=unique("aio"))
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(20):
                    await producer.send(topic, value=b"keep-%d" % i)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition(topic, 0): OffsetAndMetadata(7, "")}, group)
            await producer.begin_transaction()
            for i in range(20):
                await producer.send(topic, value=b"drop-%d" % i)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_values(txn_broker.bootstrap, topic, expect=20, idle_s=0.5) == \
        [b"keep-%d" % i for i in range(20)]
    assert committed_offset(txn_broker.bootstrap, group, topic) == 7


def test_another_connection_can_end_a_transaction_given_its_producer_id_and_epoch(
        txn_broker) -> None:  # type: ignore
    topic, transactional_id = unique("resume"), unique("resume")
    create_topic(txn_broker.bootstrap, topic)
    with RawClient(txn_broker.bootstrap) as writer:  # the process that wrote, then went away
        init = writer.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        added = writer.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == ErrorCode.none
        batch = raw_batch([b"prepared-0", b"prepared-1"], producer_id=pid, epoch=epoch,
                          sequence=0, transactional=True)
        assert raw_produce(writer, topic, batch, transactional_id=transactional_id) \
            .error_code == ErrorCode.none
    with RawClient(txn_broker.bootstrap) as committer:
        described = committer.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {
            "transactional_ids": [transactional_id]}).transaction_states[0]
        assert (described.transaction_state, described.producer_id,
                described.producer_epoch) == ("Ongoing", pid, epoch)
        assert [(t.topic, list(t.partitions)) for t in described.topics] == [(topic, [0])]
        listed = committer.request(ApiKey.LIST_TRANSACTIONS, 1, {
            "state_filters": ["Ongoing", "NoSuchState"], "producer_id_filters": [pid],
            "duration_filter": -1})
        assert [t.transactional_id for t in listed.transaction_states] == [transactional_id]
        assert list(listed.unknown_state_filters) == ["NoSuchState"]
        producers = committer.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
            "topics": [{"name": topic, "partition_indexes": [0]}]})
        (state,) = producers.topics[0].partitions[0].active_producers
        assert (state.producer_id, state.last_sequence, state.current_txn_start_offset) == \
            (pid, 1, 0)

        def end(commit: bool, with_epoch: int = epoch) -> ErrorCode:
            return committer.request(ApiKey.END_TXN, 3, {
                "transactional_id": transactional_id, "producer_id": pid,
                "producer_epoch": with_epoch, "committed": commit}).error_code

        assert end(True, with_epoch=epoch + 1) == ErrorCode.producer_fenced
        assert end(True) == ErrorCode.none
        assert end(True) == ErrorCode.none  # a retry of a completed commit
        assert end(False) == ErrorCode.invalid_txn_state
    assert read_values(txn_broker.bootstrap, topic, expect=2, idle_s=0.3) == \
        [b"prepared-0", b"prepared-1"]


def test_transaction_timeout_is_validated(txn_broker) -> None:  # type: ignore
    with RawClient(txn_broker.bootstrap) as client:
        response = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": unique("t"), "transaction_timeout": 900_001,
            "producer_id": -1, "producer_epoch": -1})
    assert response.error_code == ErrorCode.invalid_transaction_timeout


def test_a_transaction_left_by_an_exited_writer_is_committed_by_another_process(
        txn_broker) -> None:  # type: ignore
    topic, transactional_id = unique("2pc"), unique("2pc")
    create_topic(txn_broker.bootstrap, topic)
    writer = child("prepare", txn_broker.bootstrap, topic, transactional_id, "30", "60000")
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    assert writer.wait(30) == 0  # the writer is gone; its transaction stays open
    with TransactionClient(txn_broker.bootstrap) as client:
        prepared = client.describe(transactional_id)
        assert prepared.state == "Ongoing" and prepared.partitions == ((topic, 0),)
        assert read_values(txn_broker.bootstrap, topic, idle_s=0.3) == []
        client.end(transactional_id, prepared.producer_id, prepared.producer_epoch, commit=True)
        client.end(transactional_id, prepared.producer_id, prepared.producer_epoch, commit=True)
        assert client.describe(transactional_id).state == "CompleteCommit"
        with pytest.raises(TransactionError) as refused:
            client.end(transactional_id, prepared.producer_id, prepared.producer_epoch,
                       commit=False)
        assert refused.value.code == ErrorCode.invalid_txn_state
    assert read_values(txn_broker.bootstrap, topic, expect=30, idle_s=0.3) == \
        [b"open-%d" % i for i in range(30)]


def test_describe_answers_for_ids_without_an_open_transaction(txn_broker) -> None:  # type: ignore
    transactional_id = unique("idle")
    txn_producer(txn_broker.bootstrap, transactional_id)
    with TransactionClient(txn_broker.bootstrap) as client:
        idle = client.describe(transactional_id)  # no start time: Kafka answers -1
        assert (idle.state, idle.producer_epoch, idle.partitions) == ("Empty", 0, ())
        with pytest.raises(TransactionError) as unknown:
            client.describe(unique("never-used"))
        assert unknown.value.code == ErrorCode.transactional_id_not_found


def test_write_txn_markers_ends_a_transaction_for_tools(txn_broker) -> None:  # type: ignore
    topic = unique("markers")
    create_topic(txn_broker.bootstrap, topic)
    pid = 900_000  # a producer no coordinator knows: only the partition's state matters
    with RawClient(txn_broker.bootstrap) as client:
        batch = raw_batch([b"x", b"y"], producer_id=pid, epoch=0, sequence=0,
                          transactional=True)
        assert raw_produce(client, topic, batch).error_code == ErrorCode.none
        assert list_offset(client, topic, committed=True) == 0
        response = client.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": pid, "producer_epoch": 0, "transaction_result": False,
            "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]})
        (partition,) = response.markers[0].topics[0].partitions
        assert partition.error_code == ErrorCode.none
        assert list_offset(client, topic, committed=True) == 3
    assert read_values(txn_broker.bootstrap, topic, idle_s=0.3) == []
    assert read_values(txn_broker.bootstrap, topic, committed=False, expect=2, idle_s=0.3) == \
        [b"x", b"y"]
