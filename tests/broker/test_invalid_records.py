"""Invalid records in a produce request are answered as Kafka answers them (KIP-467): the whole
batch is refused with INVALID_RECORD or INVALID_TIMESTAMP, the response names every offending
record by its index in the batch with Kafka's message, other partitions of the request are
appended, and clients report the error on exactly the offending messages."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka import errors as kafka_errors

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records import Record, build_batch
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

HOUR_MS = 3_600_000  # message.timestamp.after.max.ms by default
NO_KEY = "Compacted topic cannot accept message without key in topic partition {}-0"
BAD_TIMESTAMPS = "One or more records have been rejected due to invalid timestamp"
OUT_OF_RANGE = re.compile(r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
                          r"The timestamp should be within \[(-?\d+), (-?\d+)\]")
# librdkafka's and kafka-python's words for the batch's other records
OTHER_RECORD = ("Failed to append record because it was part of a batch which had one more "
                "more invalid records")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch(keys: list[bytes | None], timestamps: list[int] | None = None) -> bytes:
    stamps = timestamps or [now_ms()] * len(keys)
    return build_batch([Record(i, ts, key, b"value %d" % i)
                        for i, (key, ts) in enumerate(zip(keys, stamps, strict=True))])


def create(client: RawClient, topic: str, partitions: int = 1, **configs: str) -> None:
    response = client.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout": 10_000, "validate_only": False})
    assert response.topics[0].error_code == ErrorCode.none, response


def produce_many(client: RawClient, data: dict[str, dict[int, bytes]],
                 version: int = 9) -> dict[tuple[str, int], Any]:
    """One Produce request; each partition's answer by (topic, partition)."""
    response = client.request(ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": p, "records": records} for p, records in partitions.items()]}
            for topic, partitions in data.items()]})
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def produce(client: RawClient, topic: str, records: bytes, version: int = 9) -> Any:
    return produce_many(client, {topic: {0: records}}, version)[(topic, 0)]


def record_errors(answer: Any) -> list[tuple[int, str | None]]:
    return [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors]


@pytest.fixture
def client(shared_broker: BrokerProcess):
    with RawClient(shared_broker.bootstrap) as c:
        yield c


@pytest.mark.parametrize("version", [8, 9, 11])
def test_null_keys_on_a_compacted_topic_name_each_record(client: RawClient,
                                                        version: int) -> None:
    topic = unique("nokey")
    create(client, topic, **{"cleanup.policy": "compact"})
    answer = produce(client, topic, batch([b"a", None, b"c", None]), version)
    no_key = NO_KEY.format(topic)
    assert answer.error_code == ErrorCode.invalid_record
    assert record_errors(answer) == [(1, no_key), (3, no_key)]
    assert answer.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{no_key}'"
        f"), RecordError(batchIndex=3, message='{no_key}')]")
    assert (answer.base_offset, answer.log_start_offset) == (-1, 0)
    assert produce(client, topic, batch([b"a"]), version).base_offset == 0  # nothing stored


def test_record_timestamps_out_of_range_are_named_with_the_bounds(client: RawClient) -> None:
    topic = unique("ts")
    before_ms = 60_000
    create(client, topic, **{"message.timestamp.before.max.ms": str(before_ms)})
    start = now_ms()
    # The first timestamp is no minimum: only the record in the middle is too old.
    stamps = [start, start - 2 * before_ms, start + 2 * HOUR_MS, start]
    answer = produce(client, topic, batch([b"k"] * 4, stamps))
    end = now_ms()
    assert (answer.error_code, answer.error_message) == (ErrorCode.invalid_timestamp,
                                                         BAD_TIMESTAMPS)
    assert [index for index, _ in record_errors(answer)] == [1, 2]
    for index, message in record_errors(answer):
        match = OUT_OF_RANGE.fullmatch(message or "")
        assert match, message
        ts, offset, low, high = map(int, match.groups())
        assert (ts, offset) == (stamps[index], index)
        assert start <= low + before_ms <= end and high - low == before_ms + HOUR_MS
    assert produce(client, topic, batch([b"k"])).base_offset == 0


def test_the_refusal_carries_the_partition_log_start_offset(client: RawClient) -> None:
    topic = unique("start")
    create(client, topic, **{"cleanup.policy": "compact,delete"})
    assert produce(client, topic, batch([b"a", b"b", b"c"])).error_code == ErrorCode.none
    deleted = client.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout": 5000})
    assert deleted.topics[0].partitions[0].low_watermark == 2
    answer = produce(client, topic, batch([None]))
    assert (answer.error_code, answer.log_start_offset) == (ErrorCode.invalid_record, 2)
    assert record_errors(answer) == [(0, NO_KEY.format(topic))]


def test_other_partitions_of_the_request_are_appended(client: RawClient) -> None:
    compacted, plain = unique("mixed-c"), unique("mixed-p")
    create(client, compacted, partitions=2, **{"cleanup.policy": "compact"})
    create(client, plain)
    answers = produce_many(client, {
        compacted: {0: batch([b"a", None]), 1: batch([b"a", b"b"])},
        plain: {0: batch([None, None, None])}})
    assert answers[(compacted, 0)].error_code == ErrorCode.invalid_record
    assert record_errors(answers[(compacted, 0)]) == [(1, NO_KEY.format(compacted))]
    for key in ((compacted, 1), (plain, 0)):
        assert (answers[key].error_code, answers[key].base_offset) == (ErrorCode.none, 0)
        assert (answers[key].record_errors, answers[key].error_message) == ((), None)
    again = produce_many(client, {compacted: {0: batch([b"x"]), 1: batch([b"x"])}})
    assert [again[(compacted, p)].base_offset for p in (0, 1)] == [0, 2]


def deliveries(broker: BrokerProcess, topic: str, keys: list[bytes | None],
               timestamps: list[int]) -> list[int | None]:
    """Produce one batch with confluent-kafka; each message's delivery report error code."""
    # linger.ms holds the messages until they are all queued, so they go in one batch. The
    # partition must be known first: librdkafka moves messages produced before its metadata
    # arrives onto the partition one by one while a flush sends at once, splitting the batch.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000})
    assert topic in producer.list_topics(topic, timeout=30).topics
    reports: dict[int, KafkaError | None] = {}
    for i, (key, ts) in enumerate(zip(keys, timestamps, strict=True)):
        producer.produce(topic, value=b"v%d" % i, key=key, partition=0, timestamp=ts,
                         on_delivery=lambda err, _msg, i=i: reports.__setitem__(i, err))
    assert producer.flush(30) == 0
    assert sorted(reports) == list(range(len(keys)))
    return [None if reports[i] is None else reports[i].code()  # type: ignore[union-attr]
            for i in range(len(keys))]


def log_end_offset(client: RawClient, topic: str) -> int:
    response = client.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0,
                              "topics": [{"name": topic, "partitions": [
                                  {"partition_index": 0, "current_leader_epoch": -1,
                                   "timestamp": -1}]}]})
    return response.topics[0].partitions[0].offset


def test_librdkafka_fails_exactly_the_null_key_messages_as_invalid_record(
        shared_broker: BrokerProcess, client: RawClient) -> None:
    """librdkafka gives the records named in record_errors INVALID_RECORD (when there are
    several, whatever the partition's error) and the batch's other messages, which were not
    stored either, _INVALID_DIFFERENT_RECORD: neither is retried; the application may send
    the others again."""
    topic = unique("rdk-nokey")
    create(client, topic, **{"cleanup.policy": "compact"})
    keys = [b"a", None, b"c", None, b"e"]
    codes = deliveries(shared_broker, topic, keys, [now_ms()] * len(keys))
    other, invalid = KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD
    assert codes == [other, invalid, other, invalid, other]
    assert log_end_offset(client, topic) == 0


def test_librdkafka_gives_the_whole_batch_the_error_of_a_lone_offending_record(
        shared_broker: BrokerProcess, client: RawClient) -> None:
    """With one record named, librdkafka hands every message of the batch the partition's
    error, INVALID_TIMESTAMP: its delivery-report step forces the partition error onto all
    messages unless record_errors holds more than one entry (the messages' texts still
    differ, but confluent-kafka shows producers only the code)."""
    topic = unique("rdk-ts")
    create(client, topic)
    now = now_ms()
    codes = deliveries(shared_broker, topic, [b"a", b"b", b"c"], [now, now + 2 * HOUR_MS, now])
    assert codes == [KafkaError.INVALID_TIMESTAMP] * 3
    # Several records named: each is INVALID_RECORD, even for timestamps, the rest different.
    later = now_ms() + 2 * HOUR_MS
    codes = deliveries(shared_broker, topic, [b"a", b"b", b"c"], [later, now_ms(), later])
    assert codes == [KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD,
                     KafkaError.INVALID_RECORD]
    assert log_end_offset(client, topic) == 0


def test_kafka_python_reports_each_record_with_its_message(shared_broker: BrokerProcess,
                                                           client: RawClient) -> None:
    topic = unique("kpy-nokey")
    create(client, topic, **{"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap, linger_ms=2000)
    try:
        futures = [producer.send(topic, key=key, value=b"v", partition=0)
                   for key in (b"a", None, b"c")]
        producer.flush(30)
    finally:
        producer.close()
    assert all(f.is_done and f.failed() for f in futures)
    offending, other = futures[1].exception, futures[0].exception
    assert type(offending) is kafka_errors.InvalidRecordError
    assert NO_KEY.format(topic) in str(offending)
    assert type(other) is kafka_errors.KafkaError and OTHER_RECORD in str(other)
    assert type(futures[2].exception) is kafka_errors.KafkaError
