"""Reading and writing whole topics with confluent-kafka, outside Spark, to check what the jobs
wrote: every record of a topic up to its end offsets, with partition, offset, timestamp, key,
value and headers."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

READ_DEADLINE_S = 60.0


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def create(bootstrap: str, topic: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)
    return topic


def read_all(bootstrap: str, topic: str) -> list[Record]:
    """Every record of `topic` (read_committed), ordered by partition and offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-jobs-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                for p in partitions}
        wanted = {p: hi for p, (lo, hi) in ends.items() if hi > lo}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in wanted])
        return sorted(_consume(consumer, topic, wanted), key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _consume(consumer: Consumer, topic: str, ends: dict[int, int]) -> list[Record]:
    """Until each partition's position reaches its end offset (positions move past
    transaction markers, which are never delivered)."""
    records: list[Record] = []
    remaining = dict(ends)
    deadline = time.monotonic() + READ_DEADLINE_S
    while remaining:
        assert time.monotonic() < deadline, f"records missing up to end offsets {remaining}"
        for msg in consumer.consume(500, timeout=0.5):
            assert msg.error() is None, msg.error()
            records.append(Record(msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(),
                                  msg.value(), tuple(msg.headers() or ())))
        positions = consumer.position([TopicPartition(topic, p) for p in remaining])
        for tp in positions:
            if tp.offset >= remaining[tp.partition]:
                del remaining[tp.partition]
    return records


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-jobs-reader"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in partitions}
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The offsets `group` has committed on `topic`'s partitions (partitions without one left
    out)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    tps = result[group].result(30).topic_partitions
    return {tp.partition: tp.offset for tp in tps if tp.topic == topic and tp.offset >= 0}
