"""The history checker's drivers against a real broker process: a continuous idempotent acks=all
producer and a tailing consumer make a history that checks clean, also across a SIGKILL and
restart of the broker; `read_all` reads every partition exactly to its high watermark; and
records removed from the log (DeleteRecords) show as lost and as vanished reads."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker_process import BrokerProcess
from tests.cluster.cluster_support import create_topic
from tests.cluster.history import (
    History,
    Lost,
    acked_and_read,
    continuous_run,
    encode_value,
    final_read,
    read_all,
)

WAIT_S = 60.0


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_continuous_run_checks_clean(broker: BrokerProcess) -> None:
    topic = topic_name("history")
    create_topic(broker.bootstrap, topic, 3, replication_factor=1)
    history = History()
    with continuous_run(broker.bootstrap, topic, history, 3, rate=2000) as (producer, consumer):
        assert acked_and_read(producer, consumer, 1000, WAIT_S)
    final_read(history, broker.bootstrap, topic)
    report = history.check()
    assert report.ok, str(report)
    assert producer.unflushed == 0 and producer.fatal == []
    sent = producer.next_value
    assert report.counts["sent"] == report.counts["acked"] == report.counts["final"] == sent
    assert report.counts["positions read"] >= 1000


def test_a_run_across_a_sigkill_and_restart_of_the_broker_checks_clean(
        broker: BrokerProcess) -> None:
    topic = topic_name("killed")
    create_topic(broker.bootstrap, topic, 2, replication_factor=1)
    history = History()
    with continuous_run(broker.bootstrap, topic, history, 2) as (producer, consumer):
        assert acked_and_read(producer, consumer, 300, WAIT_S)
        broker.kill()
        broker.start()  # the same port: the clients reconnect by themselves
        assert acked_and_read(producer, consumer, producer.next_value + 300, WAIT_S)
    final_read(history, broker.bootstrap, topic)
    report = history.check()
    assert report.ok, str(report)
    assert report.counts["acked"] >= 600


def test_read_all_reads_each_partition_to_its_high_watermark(broker: BrokerProcess) -> None:
    topic = topic_name("read-all")
    create_topic(broker.bootstrap, topic, 3, replication_factor=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for n in range(250):
        producer.produce(topic, encode_value(n), partition=n % 2)  # partition 2 stays empty
    assert producer.flush(30) == 0
    records = read_all(broker.bootstrap, topic, timeout_s=WAIT_S)
    assert sorted(records) == [0, 1, 2]
    for partition in (0, 1):
        expected = [(i, encode_value(n)) for i, n in enumerate(range(partition, 250, 2))]
        assert records[partition] == expected
    assert records[2] == []


def test_records_deleted_from_the_log_are_lost_and_vanished_reads(
        broker: BrokerProcess) -> None:
    topic = topic_name("deleted")
    create_topic(broker.bootstrap, topic, 1, replication_factor=1)
    history = History()
    with continuous_run(broker.bootstrap, topic, history, rate=2000) as (producer, consumer):
        assert acked_and_read(producer, consumer, 200, WAIT_S)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 10)]).values()
    assert deleted.result(30).low_watermark == 10  # the new log start
    final_read(history, broker.bootstrap, topic)
    report = history.check()
    assert report.lost == [Lost(n, 0, n) for n in range(10)]
    assert [(p.offset, p.value) for p in report.phantom] == [(n, n) for n in range(10)]
    assert not (report.duplicated or report.reordered or report.conflicts)
