"""Capture record batches exactly as librdkafka writes them, as fixtures for tests/records.

Produces a known set of records with confluent-kafka (librdkafka) into librdkafka's built-in
mock cluster (loopback only) with each codec, plus one committed and one aborted transaction,
then fetches partition 0 with a raw Fetch v4 request, so the batches come back byte for byte as
stored. README.md beside this script describes the files it writes.

Usage, from the repository root: python -m tests.records.data.capture_librdkafka
"""

from __future__ import annotations

import datetime
import hashlib
import json
import socket
import struct
from pathlib import Path

from confluent_kafka import Producer
from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v4.response import FetchResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from tests.records.kafka_wire import mock_cluster_address, round_trip

HERE = Path(__file__).parent
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP = 1_700_000_000_000


def sample_records() -> list[dict]:
    """Null and empty keys and values, headers with null values and a non-ASCII key, and one
    128 KiB value (larger than one snappy or LZ4 block), partly compressible."""
    big = b"".join(hashlib.sha256(b"%d" % (i // 4)).digest() for i in range(128 * 1024 // 32))
    small = [
        {"key": b"key-%d" % i, "value": b"value-%d" % i * 3, "headers": []} for i in range(4, 12)
    ]
    return [
        {"key": None, "value": b"", "headers": []},
        {"key": b"k1", "value": None, "headers": []},
        {"key": b"", "value": b"small", "headers": [("h1", b"v1"), ("h2", None)]},
        {"key": b"big", "value": big, "headers": [("\u043a\u043b\u044e\u0447", b"\x00\xff")]},
        *small,
    ]


def describe(record: dict, offset: int, timestamp: int) -> dict:
    value = record["value"]
    return {
        "offset": offset,
        "timestamp": timestamp,
        "key": None if record["key"] is None else record["key"].hex(),
        "value_len": None if value is None else len(value),
        "value_sha256": None if value is None else hashlib.sha256(value).hexdigest(),
        "headers": [[k, None if v is None else v.hex()] for k, v in record["headers"]],
    }


def produce(producer: Producer, topic: str, records: list[dict], first_ts: int) -> list[dict]:
    for i, record in enumerate(records):
        producer.produce(
            topic,
            partition=0,
            key=record["key"],
            value=record["value"],
            headers=record["headers"] or None,
            timestamp=first_ts + i * 7,
        )
    assert producer.flush(30) == 0
    return [describe(r, i, first_ts + i * 7) for i, r in enumerate(records)]


def fetch_all(address: tuple[str, int], topic: str) -> bytes:
    """Whole record batches of partition 0, from offset 0 to the high watermark."""
    out, offset = bytearray(), 0
    with socket.create_connection(address, timeout=10) as sock:
        for correlation_id in range(100):  # bounded: every round returns at least one batch
            request = FetchRequest(
                max_wait=datetime.timedelta(milliseconds=100),
                min_bytes=i32(1),
                max_bytes=i32(64 << 20),
                topics=(
                    FetchTopic(
                        topic=TopicName(topic),
                        partitions=(
                            FetchPartition(
                                partition=i32(0),
                                fetch_offset=i64(offset),
                                partition_max_bytes=i32(16 << 20),
                            ),
                        ),
                    ),
                ),
            )
            partition = (
                round_trip(sock, request, FetchResponse, correlation_id).responses[0].partitions[0]
            )
            assert partition.error_code == 0, partition.error_code
            records, pos = partition.records or b"", 0
            while len(records) - pos >= 61:  # whole batches only; a fetch may end mid-batch
                size = 12 + struct.unpack_from(">i", records, pos + 8)[0]
                if pos + size > len(records):
                    break
                base_offset, last_delta = (
                    struct.unpack_from(">q", records, pos)[0],
                    struct.unpack_from(">i", records, pos + 23)[0],
                )
                out += records[pos : pos + size]
                offset, pos = base_offset + last_delta + 1, pos + size
            if offset >= partition.high_watermark:
                return bytes(out)
    raise RuntimeError(f"could not fetch all of {topic}")


def main() -> None:
    manifest, records = {}, sample_records()
    for codec in CODECS:
        producer = Producer(
            {
                "test.mock.num.brokers": 1,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 200,
                "log_level": 3,
            }
        )
        topic = f"capture-{codec}"
        expected = produce(producer, topic, records, BASE_TIMESTAMP)
        (HERE / f"librdkafka-{codec}.bin").write_bytes(
            fetch_all(mock_cluster_address(producer), topic)
        )
        manifest[f"librdkafka-{codec}.bin"] = {"codec": codec, "records": expected}

    producer = Producer(
        {
            "test.mock.num.brokers": 1,
            "transactional.id": "capture-txn",
            "linger.ms": 50,
            "log_level": 3,
        }
    )
    producer.init_transactions(30)
    transactions, next_offset = [], 0
    for commit, first_ts in ((True, BASE_TIMESTAMP + 10_000), (False, BASE_TIMESTAMP + 20_000)):
        producer.begin_transaction()
        produced = produce(producer, "capture-txn", records[4:7], first_ts)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        for entry in produced:
            entry["offset"] += next_offset
        transactions.append({"commit": commit, "records": produced})
        next_offset += len(produced) + 1  # the marker takes an offset
    (HERE / "librdkafka-txn.bin").write_bytes(
        fetch_all(mock_cluster_address(producer), "capture-txn")
    )
    manifest["librdkafka-txn.bin"] = {"codec": "none", "transactions": transactions}
    (HERE / "librdkafka.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
