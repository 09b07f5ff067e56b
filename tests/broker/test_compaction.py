"""Log compaction in the real broker process, with confluent-kafka: compacted topics shrink to
the last value per key, tombstones last delete.retention.ms, offsets never change, producer
state survives as empty batches, reads go on during cleaning, a SIGKILL mid-cleaning loses
nothing, and __consumer_offsets stays small under steady commits."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.broker.compaction_support import (
    CLEANER_BROKER_CONFIG,
    DEADLINE_S,
    Message,
    Reader,
    Update,
    batches_on_disk,
    cleaned_through,
    cleaner_checkpoint,
    consume,
    create_compacted,
    has_cleaning_files,
    latest,
    log_bytes,
    partition_dir,
    produce,
    roll_past,
    segment_bases,
)
from tests.broker.txn_support import wait_until

KEYS = 1_000
UPDATES = 100_000
RETENTION_MS = 4_000


def updates(count: int, keys: int, tag: str = "v", deletes: int = 0) -> list[Update]:
    """`count` updates over `keys` keys; the last update of the first `deletes` keys is a
    tombstone."""
    out: list[Update] = [(b"key-%d" % (i % keys), f"{tag}-{i}".encode()) for i in range(count)]
    for i in range(count - keys, count):
        if i % keys < deletes:
            out[i] = (out[i][0], None)
    return out


def test_compacted_topic_shrinks_to_the_last_value_per_key(broker_factory) -> None:  # type: ignore
    broker = broker_factory(CLEANER_BROKER_CONFIG)
    topic = create_compacted(broker, "compacted", delete_retention_ms=str(RETENTION_MS),
                             min_cleanable_dirty_ratio="0.01")
    written = updates(UPDATES, KEYS, deletes=100)
    delivered = produce(broker, topic, written)
    last = delivered[-1].offset
    expected = latest(written)
    roll_past(broker, topic, last)
    cleaned_through(broker, topic, last)
    directory = partition_dir(broker, topic)
    assert log_bytes(directory) < 150_000  # ~5 MB were written

    messages = consume(broker, topic)
    offsets = [m.offset for m in messages]
    assert offsets == sorted(set(offsets))
    data = [m for m in messages if m.key != b"roll"]
    assert len(data) == KEYS  # exactly one record per key, tombstones included
    assert {m.key: m.value for m in data} == expected
    assert sum(1 for m in data if m.value is None) == 100  # younger than delete.retention.ms
    by_offset = {m.offset: (m.key, m.value) for m in delivered}
    assert all(by_offset[m.offset] == (m.key, m.value) for m in data)  # offsets unchanged

    # Once delete.retention.ms has passed since they were cleaned, the next round drops them.
    def tombstones_gone() -> bool:
        roll_past(broker, topic, produce(broker, topic, [(b"roll", b"y")])[-1].offset)
        return not any(m.value is None for m in consume(broker, topic))

    wait_until(tombstones_gone, RETENTION_MS / 1000 + DEADLINE_S, "expired tombstones to go")
    final = [m for m in consume(broker, topic) if m.key != b"roll"]
    assert {m.key: m.value for m in final} == {k: v for k, v in expected.items() if v}


def test_producer_state_batch_is_kept_empty_and_cleaned_offsets_read_forward(
        broker_factory) -> None:  # type: ignore
    broker = broker_factory(CLEANER_BROKER_CONFIG)
    topic = create_compacted(broker, "idem", min_cleanable_dirty_ratio="0.01")
    delivered = produce(broker, topic, updates(5_000, 10), idempotent=True)
    directory = partition_dir(broker, topic)
    last_batch = max((h for h in batches_on_disk(directory) if h.producer_id >= 0),
                     key=lambda h: h.base_offset)
    assert last_batch.last_offset == delivered[-1].offset and last_batch.records_count
    produce(broker, topic, updates(20, 10, tag="plain"))  # supersedes every idempotent record
    last = delivered[-1].offset + 20
    roll_past(broker, topic, last)
    cleaned_through(broker, topic, last)

    # The batch holding the producer's last sequence stays, empty, so its state survives.
    kept = {h.base_offset: h for h in batches_on_disk(directory)}[last_batch.base_offset]
    assert (kept.last_offset, kept.records_count) == (last_batch.last_offset, 0)
    assert (kept.producer_id, kept.producer_epoch, kept.base_sequence, kept.last_sequence) == \
        (last_batch.producer_id, last_batch.producer_epoch, last_batch.base_sequence,
         last_batch.last_sequence)
    messages = [m for m in consume(broker, topic) if m.key != b"roll"]
    assert [m.value for m in messages] == [b"plain-%d" % i for i in range(10, 20)]
    # A read at an offset cleaned away starts at the next record.
    gone = delivered[2_500].offset
    first = consume(broker, topic, start=gone)[0]
    assert first.offset == messages[0].offset > gone


def test_reads_go_on_while_the_broker_cleans(broker_factory) -> None:  # type: ignore
    broker = broker_factory(CLEANER_BROKER_CONFIG)
    # No log is ever dirtier than 1: nothing is cleaned until the ratio is lowered below.
    topic = create_compacted(broker, "busy", min_cleanable_dirty_ratio="1")
    written = updates(UPDATES, 500)
    expected = latest(written)
    last = produce(broker, topic, written)[-1].offset
    directory = partition_dir(broker, topic)
    roll_past(broker, topic, last)
    reader = Reader(broker, topic)
    try:
        check_read(reader.read(), expected)  # connected before the round starts
        segments = len(segment_bases(directory))
        set_topic_config(broker, topic, "min.cleanable.dirty.ratio", "0.01")
        deadline = time.monotonic() + DEADLINE_S
        while not (has_cleaning_files(directory) or len(segment_bases(directory)) < segments):
            assert time.monotonic() < deadline, "the cleaner never started"
            time.sleep(0.001)  # watching the files for the round to start
        in_round = (cleaner_checkpoint(broker, topic) or 0) <= last
        check_read(reader.read(), expected)  # fetches served while the round runs
        cleaned_through(broker, topic, last)
        check_read(reader.read(), expected)
    finally:
        reader.close()
    assert in_round, "the round was over before the read started"


def set_topic_config(broker, topic: str, name: str, value: str) -> None:  # type: ignore
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)


def check_read(messages: list[Message], expected: dict[bytes, bytes | None]) -> None:
    data = [m for m in messages if m.key != b"roll"]
    offsets = [m.offset for m in data]
    assert offsets == sorted(set(offsets))
    assert {m.key: m.value for m in data} == expected


def test_sigkill_while_cleaning_loses_no_key(broker_factory) -> None:  # type: ignore
    broker = broker_factory(CLEANER_BROKER_CONFIG)
    topic = create_compacted(broker, "crash", min_cleanable_dirty_ratio="1")
    directory = partition_dir(broker, topic)
    written: list[Update] = []
    kills = 0
    for round_ in range(4):
        set_topic_config(broker, topic, "min.cleanable.dirty.ratio", "1")  # hold the cleaner
        batch = updates(20_000, 300, tag=f"r{round_}", deletes=20)
        written += batch
        last = produce(broker, topic, batch)[-1].offset
        roll_past(broker, topic, last)
        set_topic_config(broker, topic, "min.cleanable.dirty.ratio", "0.01")  # and let it go
        deadline = time.monotonic() + DEADLINE_S
        while not has_cleaning_files(directory) and time.monotonic() < deadline:
            time.sleep(0.001)  # watching for the cleaner's files, to kill it mid-round
        if has_cleaning_files(directory):
            broker.kill()
            kills += 1
            broker.start()
    assert kills >= 3, "the broker was not killed in the middle of cleaning"
    last = produce(broker, topic, [(b"roll", b"z")])[-1].offset
    roll_past(broker, topic, last)
    cleaned_through(broker, topic, last)
    messages = [m for m in consume(broker, topic) if m.key != b"roll"]
    offsets = [m.offset for m in messages]
    assert offsets == sorted(set(offsets))
    assert {m.key: m.value for m in messages} == latest(written)
    assert len(messages) == 300


def test_consumer_offsets_stay_small_under_steady_commits(broker_factory) -> None:  # type: ignore
    broker = broker_factory({**CLEANER_BROKER_CONFIG, "offsets.topic.num.partitions": "1",
                             "log.roll.ms": "300", "group.initial.rebalance.delay.ms": "0"})
    topic = create_compacted(broker, "committed")  # any topic: its offsets are committed
    partitions = [TopicPartition(topic, 0, 0)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": str(uuid.uuid4()),
                         "enable.auto.commit": False})
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    sizes = []
    commits = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            partitions[0].offset = commits
            consumer.commit(offsets=partitions, asynchronous=False)
            commits += 1
            sizes.append(log_bytes(offsets_dir))
            time.sleep(0.1)  # the commit cadence under test, not a wait for a condition
    finally:
        consumer.close()
    one_commit = sizes[0]  # the first commit alone in the log
    assert commits >= 50
    _, high = _watermarks(broker)
    assert high >= commits  # every commit was appended: unbounded, that is commits x one_commit
    assert max(sizes[len(sizes) // 3:]) <= 12 * one_commit  # bounded while commits went on
    assert sum(h.size for h in batches_on_disk(offsets_dir)) <= 12 * one_commit


def _watermarks(broker) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", 0),
                                              timeout=30)
    finally:
        consumer.close()
