"""kcat, kafka-python and aiokafka against the real broker process, with no setting changed but
the bootstrap address."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.broker_process import BrokerProcess


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kcat(*args: str, stdin: bytes | None = None) -> str:
    binary = shutil.which("kcat")
    assert binary, "kcat is installed by the test set-up (./dev test)"
    done = subprocess.run([binary, *args], input=stdin, capture_output=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_kcat_metadata_produce_and_consume(shared_broker: BrokerProcess) -> None:
    topic = unique("kcat")
    lines = [f"key{i}:value {i}" for i in range(20)]
    kcat("-b", shared_broker.bootstrap, "-P", "-t", topic, "-K", ":", "-z", "zstd",
         "-H", "origin=kcat", stdin=("\n".join(lines) + "\n").encode())
    listing = kcat("-b", shared_broker.bootstrap, "-L")
    assert f'topic "{topic}" with 1 partitions' in listing
    assert f"broker 0 at {shared_broker.bootstrap}" in listing
    out = kcat("-b", shared_broker.bootstrap, "-C", "-t", topic, "-e", "-o", "beginning",
               "-f", "%k=%s|%h|%o\n")
    assert out.splitlines() == [f"key{i}=value {i}|origin=kcat|{i}" for i in range(20)]


def test_kafka_python_round_trip_with_headers(shared_broker: BrokerProcess) -> None:
    topic = unique("kpy")
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap,
                             compression_type="gzip")
    for i in range(100):
        producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                      headers=[("seq", str(i).encode())])
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append(message)
        if len(got) == 100:
            break
    consumer.close()
    assert sorted(int(m.value[1:]) for m in got) == list(range(100))
    assert all(m.headers == [("seq", m.value[1:])] for m in got)
    assert all(m.key == b"k" + m.value[1:] for m in got)
    by_partition = {p: [m.offset for m in got if m.partition == p] for p in (0, 1)}
    assert by_partition == {0: list(range(50)), 1: list(range(50))}


def test_aiokafka_round_trip_with_headers(shared_broker: BrokerProcess) -> None:
    topic = unique("aio")

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=shared_broker.bootstrap,
                                    compression_type="lz4")
        await producer.start()
        try:
            for i in range(100):
                await producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                                    headers=[("seq", str(i).encode())])
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=shared_broker.bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(30):
                while len(got) < 100:
                    batches = await consumer.getmany(timeout_ms=1000)
                    for messages in batches.values():
                        got.extend(messages)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert [m.value for m in got] == [f"v{i}".encode() for i in range(100)]
    assert [m.offset for m in got] == list(range(100))
    assert all(m.headers == (("seq", m.value[1:]),) for m in got)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_reads_what_confluent_kafka_wrote(shared_broker: BrokerProcess, codec: str) -> None:
    from confluent_kafka import Producer

    topic = unique(f"mixed-{codec}")
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": codec})
    for i in range(50):
        producer.produce(topic, value=f"m{i}".encode())
    assert producer.flush(30) == 0
    out = kcat("-b", shared_broker.bootstrap, "-C", "-t", topic, "-e", "-o", "beginning")
    assert out.splitlines() == [f"m{i}" for i in range(50)]
