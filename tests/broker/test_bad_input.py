"""Everything a Kafka broker rejects is rejected with Kafka's error code, and malformed frames close
only their own connection — stored data and other clients are untouched."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records import Record, build_batch
from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

PRODUCE_V = 9


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def batch(n: int = 3, key: bytes | None = b"k") -> bytes:
    return build_batch([Record(i, 1_700_000_000_000 + i, key, b"value %d" % i) for i in range(n)])


def produce(client: RawClient, topic: str, records: bytes, partition: int = 0) -> Any:
    response = client.request(ApiKey.PRODUCE, PRODUCE_V, {
        "transactional_id": None, "acks": 1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    return response.responses[0].partition_responses[0]


def create(client: RawClient, topic: str, **configs: str) -> None:
    response = client.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout": 10_000, "validate_only": False})
    assert response.topics[0].error_code == ErrorCode.none, response


@pytest.fixture
def client(shared_broker: BrokerProcess):
    with RawClient(shared_broker.bootstrap) as c:
        yield c


def test_valid_batch_is_accepted(client: RawClient) -> None:
    topic = unique("ok")
    create(client, topic)
    answer = produce(client, topic, batch())
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)
    answer = produce(client, topic, batch())
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 3)


def test_bad_crc_is_corrupt_message(client: RawClient) -> None:
    topic = unique("crc")
    create(client, topic)
    data = bytearray(batch())
    data[-1] ^= 0xFF
    assert produce(client, topic, bytes(data)).error_code == ErrorCode.corrupt_message
    assert produce(client, topic, b"\x00" * 10).error_code == ErrorCode.corrupt_message
    assert produce(client, topic, batch()).base_offset == 0  # nothing was stored


def test_too_large_is_message_too_large(broker_factory) -> None:
    broker = broker_factory({"message.max.bytes": "2048"})
    with RawClient(broker.bootstrap) as c:
        topic = unique("big")
        create(c, topic)
        big = build_batch([Record(0, 1_700_000_000_000, None, b"x" * 4096)])
        assert produce(c, topic, big).error_code == ErrorCode.message_too_large


def test_unknown_topic_and_partition(client: RawClient) -> None:
    topic = unique("known")
    create(client, topic)
    assert produce(client, unique("nope"), batch()).error_code == \
        ErrorCode.unknown_topic_or_partition
    assert produce(client, topic, batch(), partition=7).error_code == \
        ErrorCode.unknown_topic_or_partition


def test_client_control_batch_is_invalid_record(client: RawClient) -> None:
    topic = unique("ctl")
    create(client, topic)
    marker = build_end_transaction_batch(
        EndTransactionMarker(ControlRecordType.COMMIT, 0), producer_id=1, producer_epoch=0,
        timestamp=1_700_000_000_000)
    assert produce(client, topic, marker).error_code == ErrorCode.invalid_record


def test_null_key_on_compacted_topic_is_invalid_record(client: RawClient) -> None:
    topic = unique("compact")
    create(client, topic, **{"cleanup.policy": "compact"})
    assert produce(client, topic, batch(key=None)).error_code == ErrorCode.invalid_record
    assert produce(client, topic, batch(key=b"k")).error_code == ErrorCode.none


def test_invalid_topic_name_in_metadata(client: RawClient) -> None:
    response = client.request(ApiKey.METADATA, 12, {
        "topics": [{"name": "bad name!", "topic_id": None}], "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False})
    assert response.topics[0].error_code == ErrorCode.invalid_topic_exception


def test_fetch_out_of_range(client: RawClient) -> None:
    topic = unique("range")
    create(client, topic)
    produce(client, topic, batch())
    response = client.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 99,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    assert response.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    assert response.responses[0].partitions[0].high_watermark == 3


def test_unsupported_api_versions_request_gets_v0_error_reply(client: RawClient) -> None:
    # header v2: client id "" and an empty tagged-field section; the body is unreadable to us
    client.send_frame(struct.pack(">hhi", ApiKey.API_VERSIONS, 99, 7) + b"\x00\x00\x00junk")
    frame = client.read_frame()
    correlation, error = struct.unpack_from(">ih", frame)
    assert (correlation, error) == (7, ErrorCode.unsupported_version.value)


def test_unsupported_version_closes_the_connection(client: RawClient) -> None:
    client.send_frame(struct.pack(">hhi", ApiKey.PRODUCE, 99, 1) + b"\x00\x00")
    assert client.is_closed_by_peer()


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


METADATA_V12_HEADER = struct.pack(">hhih", ApiKey.METADATA, 12, 1, 0) + b"\x00"


@pytest.mark.parametrize("frame", [
    struct.pack(">i", -5) + b"xx",                           # negative size
    struct.pack(">i", 0x7FFF_FFFF) + b"\x00" * 64,           # huge size prefix
    sized(b"\xff" * 12),                                     # garbage: unknown API key
    sized(METADATA_V12_HEADER + b"\x05"),                    # body cut short: 4 topics, none
    sized(struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 500) + b"abcd"),  # client id overruns
    sized(b"\x00"),                                          # shorter than any header
], ids=["negative-size", "huge-size", "garbage", "truncated-body", "bad-client-id", "tiny"])
def test_malformed_frames_close_only_their_connection(shared_broker: BrokerProcess,
                                                      frame: bytes) -> None:
    topic = unique("neighbour")
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    producer.produce(topic, value=b"before")
    assert producer.flush(30) == 0
    with RawClient(shared_broker.bootstrap) as hostile:
        hostile.sock.sendall(frame)
        assert hostile.is_closed_by_peer()
    producer.produce(topic, value=b"after")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": unique("g")})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    for _ in range(40):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == 2:
            break
    consumer.close()
    assert values == [b"before", b"after"]


def fetch_one(client: RawClient, topic: str, *, offset: int = 0, max_wait_ms: int = 0,
              epoch: int = -1, isolation_level: int = 0) -> Any:
    """The partition's entry of a consumer's fetch of partition 0 (at most 1 MiB)."""
    response = client.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return response.responses[0].partitions[0]


def leader_epoch(client: RawClient, topic: str) -> int:
    """Partition 0's leader epoch, as Metadata tells it."""
    metadata = client.request(ApiKey.METADATA, 9, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    return metadata.topics[0].partitions[0].leader_epoch


def test_a_fetch_from_an_older_or_newer_leader_epoch_is_refused(broker: BrokerProcess) -> None:
    """KIP-320: a consumer that knows an older epoch than the leader's is fenced, one that
    knows a newer one is told the epoch is unknown; -1 and the leader's own epoch read."""
    topic = unique("epoch")
    with RawClient(broker.bootstrap) as client:
        create(client, topic)
        produce(client, topic, batch())
    broker.restart()  # the partition's leader takes a new epoch
    with RawClient(broker.bootstrap) as client:
        epoch = leader_epoch(client, topic)
        assert epoch >= 1
        assert fetch_one(client, topic, epoch=epoch - 1).error_code == \
            ErrorCode.fenced_leader_epoch
        assert fetch_one(client, topic, epoch=epoch + 1).error_code == \
            ErrorCode.unknown_leader_epoch
        for known in (-1, epoch):
            found = fetch_one(client, topic, epoch=known)
            assert found.error_code == ErrorCode.none and found.high_watermark == 3
