"""Cross-check against librdkafka, in both directions.

Batches librdkafka wrote (fixtures captured from its mock cluster, see data/README.md) decode
here into exactly what was produced. Batches we build, produced raw into librdkafka's mock
cluster on loopback, are read back by confluent-kafka's consumer with CRC checks on.
"""

import datetime
import hashlib
import json
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v3.response import ProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32

from spark_log.records.batch_header import Compression, TimestampType
from spark_log.records.control_record import ControlRecordType, read_end_transaction_marker
from spark_log.records.record import Record
from spark_log.records.record_batch import build_batch, iter_batches

from .kafka_wire import mock_cluster_address, round_trip

DATA = Path(__file__).parent / "data"
MANIFEST = json.loads((DATA / "librdkafka.json").read_text())
CODEC_FILES = [name for name, entry in MANIFEST.items() if "records" in entry]


def expected_view(entry: dict) -> tuple:
    headers = tuple((k, None if v is None else bytes.fromhex(v)) for k, v in entry["headers"])
    key = None if entry["key"] is None else bytes.fromhex(entry["key"])
    return (
        entry["offset"],
        entry["timestamp"],
        key,
        entry["value_len"],
        entry["value_sha256"],
        headers,
    )


def record_view(record: Record) -> tuple:
    value = record.value
    digest = None if value is None else hashlib.sha256(value).hexdigest()
    size = None if value is None else len(value)
    return record.offset, record.timestamp, record.key, size, digest, record.headers


def test_every_codec_was_captured():
    assert sorted(MANIFEST[name]["codec"] for name in CODEC_FILES) == sorted(
        c.name.lower() for c in Compression
    )


@pytest.mark.parametrize("name", CODEC_FILES)
def test_librdkafka_batches_decode(name):
    entry = MANIFEST[name]
    batches = list(iter_batches((DATA / name).read_bytes()))
    records, next_sequence = [], 0
    for batch in batches:
        header = batch.header
        assert header.compression == Compression[entry["codec"].upper()]
        assert header.timestamp_type == TimestampType.CREATE_TIME
        assert header.producer_id >= 0 and header.base_sequence == next_sequence
        next_sequence += header.records_count
        decoded = batch.decode()  # CRC checked
        assert header.max_timestamp == max(r.timestamp for r in decoded.records)
        assert list(batch.keys()) == [r.key for r in decoded.records]
        records.extend(decoded.records)
    assert [record_view(r) for r in records] == [expected_view(e) for e in entry["records"]]


def test_librdkafka_transactions_and_markers_decode():
    entry = MANIFEST["librdkafka-txn.bin"]
    batches = list(iter_batches((DATA / "librdkafka-txn.bin").read_bytes()))
    assert [b.header.is_control for b in batches] == [False, True, False, True]
    producer_ids = {b.header.producer_id for b in batches}
    assert len(producer_ids) == 1 and producer_ids.pop() >= 0
    for (data, marker), txn in zip(
        zip(batches[::2], batches[1::2], strict=True), entry["transactions"], strict=True
    ):
        assert data.header.is_transactional
        decoded = data.decode()
        assert [record_view(r) for r in decoded.records] == [
            expected_view(e) for e in txn["records"]
        ]
        assert marker.header.is_transactional and marker.header.crc == 0  # the mock skips CRCs
        control = marker.decode(verify_crc=False)
        assert control.records[0].offset == decoded.records[-1].offset + 1
        kind = read_end_transaction_marker(control).type
        assert kind == (ControlRecordType.COMMIT if txn["commit"] else ControlRecordType.ABORT)


@pytest.fixture(scope="module")
def mock_cluster():
    producer = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    yield producer, mock_cluster_address(producer)
    producer.flush(5)


def produce_raw(address, topic: str, batches: bytes) -> None:
    request = ProduceRequest(
        acks=i16(1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(PartitionProduceData(index=i32(0), records=batches),),
            ),
        ),
    )
    with socket.create_connection(address, timeout=10) as sock:
        response = round_trip(sock, request, ProduceResponse, 1)
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == 0 and partition.base_offset == 0


def consume(address, topic: str, count: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": f"{address[0]}:{address[1]}",
            "group.id": "records-tests",
            "enable.auto.commit": False,
            "check.crcs": True,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages, deadline = [], time.monotonic() + 60
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
        return messages
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", list(Compression))
def test_librdkafka_consumes_our_batches(mock_cluster, codec):
    producer, address = mock_cluster
    topic = f"ours-{codec.name.lower()}"
    producer.list_topics(topic, timeout=10)  # the mock cluster creates the topic on demand
    records = [
        Record(
            i,
            1_700_000_000_000 + i,
            None if i % 4 == 0 else b"k%d" % i,
            b"v%d" % i * (i * 700),
            (("h", b"%d" % i), ("null", None)) if i % 2 else (),
        )
        for i in range(40)
    ]
    batches = b"".join(
        build_batch(records[i : i + 10], base_offset=i, compression=codec) for i in range(0, 40, 10)
    )
    produce_raw(address, topic, batches)
    messages = consume(address, topic, len(records))
    got = [
        Record(m.offset(), m.timestamp()[1], m.key(), m.value(), tuple(m.headers() or ()))
        for m in messages
    ]
    assert got == records
    assert {m.timestamp()[0] for m in messages} == {1}  # TIMESTAMP_CREATE_TIME
