"""Prometheus metrics of a real broker process (`--metrics-port`): after producing, consuming,
committing and leaving a transaction open, one scrape of /metrics shows the right counts,
offsets, sizes, lag, open transactions and connections; a deleted topic's series leave the
scrape."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.prometheus_samples import Samples, scrape_port, value

TOPIC, TXN_TOPIC, GROUP = "metered", "metered-txn", "metered-group"
PER_PARTITION = 5
_SERVING = re.compile(rb"Serving Prometheus metrics on http://[^:]+:(\d+)/metrics")


class MeteredBroker(BrokerProcess):
    """The broker process with `--metrics-port 0`; the port it bound is read from its log."""

    metrics_port = 0

    def start(self) -> MeteredBroker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "spark_log.broker", "--data-dir", str(self.data_dir),
                "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.await_ready()
        self.metrics_port = self._await_metrics_port()
        return self

    def _await_metrics_port(self, timeout_s: float = 30) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = _SERVING.search(self.log_path.read_bytes())
            if found:
                return int(found.group(1))
            time.sleep(0.02)
        raise TimeoutError(f"no metrics endpoint in the broker log:\n{self.log()}")


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[MeteredBroker]:
    broker = MeteredBroker(tmp_path / "data", tmp_path / "broker.log").start()
    yield broker
    assert broker.stop() == 0, broker.log()


def scrape(broker: MeteredBroker) -> Samples:
    return scrape_port(broker.metrics_port)


def _produce_and_consume(broker: MeteredBroker) -> tuple[Producer, Consumer]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 2), NewTopic(TXN_TOPIC, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in (0, 1):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, f"value-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < PER_PARTITION and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen == PER_PARTITION
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, PER_PARTITION),
                             TopicPartition(TOPIC, 1, 2)], asynchronous=False)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(TXN_TOPIC, b"pending")
    assert txn.flush(30) == 0
    return txn, consumer


def test_metrics_after_produce_consume_commit_and_open_transaction(
        metered: MeteredBroker) -> None:
    before = scrape(metered)
    assert value(before, "spark_log_active_connections") == 0
    assert value(before, "spark_log_open_transactions") == 0

    txn, consumer = _produce_and_consume(metered)
    try:
        samples = scrape(metered)
    finally:
        txn.abort_transaction(30)
        consumer.close()

    assert value(samples, "spark_log_messages_in_total", topic=TOPIC) == 2 * PER_PARTITION
    assert value(samples, "spark_log_bytes_in_total", topic=TOPIC) > 0
    assert value(samples, "spark_log_bytes_out_total", topic=TOPIC) > 0
    assert value(samples, "spark_log_messages_out_total", topic=TOPIC) == PER_PARTITION
    assert value(samples, "spark_log_requests_total", api="PRODUCE") >= 2
    assert value(samples, "spark_log_request_seconds_count", api="FETCH") >= 1
    for partition in ("0", "1"):
        labels = {"topic": TOPIC, "partition": partition}
        assert value(samples, "spark_log_log_start_offset", **labels) == 0
        assert value(samples, "spark_log_log_end_offset", **labels) == PER_PARTITION
        segment = metered.data_dir / f"{TOPIC}-{partition}" / "00000000000000000000.log"
        assert value(samples, "spark_log_log_size_bytes", **labels) == segment.stat().st_size
    assert value(samples, "spark_log_under_replicated_partitions", topic=TOPIC) == 0
    assert value(samples, "spark_log_under_replicated_partitions", topic=TXN_TOPIC) == 0
    group = {"group": GROUP, "topic": TOPIC}
    assert value(samples, "spark_log_consumer_group_committed_offset", partition="0",
                 **group) == PER_PARTITION
    assert value(samples, "spark_log_consumer_group_lag", partition="0", **group) == 0
    assert value(samples, "spark_log_consumer_group_lag", partition="1",
                 **group) == PER_PARTITION - 2
    assert value(samples, "spark_log_open_transactions") == 1
    assert value(samples, "spark_log_active_connections") >= 2


def test_metrics_endpoint_answers_404_elsewhere(metered: MeteredBroker) -> None:
    url = f"http://127.0.0.1:{metered.metrics_port}/other"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)
    assert caught.value.code == 404


def _topic_series(samples: Samples, topic: str) -> set[str]:
    return {name for name, labels in samples if ("topic", topic) in labels}


def test_a_deleted_topic_leaves_the_scrape(metered: MeteredBroker) -> None:
    admin = AdminClient({"bootstrap.servers": metered.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": metered.bootstrap})
    for i in range(3):
        producer.produce(TOPIC, f"v{i}".encode())
    assert producer.flush(30) == 0
    refused = Producer({"bootstrap.servers": metered.bootstrap, "acks": 5, "retries": 0})
    errors: list[object] = []
    refused.produce(TOPIC, b"x", on_delivery=lambda err, _msg: errors.append(err))
    assert refused.flush(30) == 0 and errors and errors[0] is not None
    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": "deleted-topic",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        got += msg is not None and msg.error() is None
    consumer.close()
    assert got == 3
    before = scrape(metered)
    assert {"spark_log_messages_in_total", "spark_log_bytes_out_total",
            "spark_log_messages_out_total", "spark_log_failed_produce_requests_total",
            "spark_log_log_size_bytes"} <= _topic_series(before, TOPIC)
    assert value(before, "spark_log_failed_produce_requests_total", topic=TOPIC) == 1

    admin.delete_topics([TOPIC])[TOPIC].result(timeout=30)
    assert _topic_series(scrape(metered), TOPIC) == set()

    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=30)
    producer.produce(TOPIC, b"again")
    assert producer.flush(30) == 0
    again = scrape(metered)
    assert value(again, "spark_log_messages_in_total", topic=TOPIC) == 1
    assert "spark_log_failed_produce_requests_total" not in _topic_series(again, TOPIC)
