"""Helpers for the compaction tests against the real broker: compacted topics, producing keyed
updates with confluent-kafka, reading a partition back, and looking at its files on disk."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.records import iter_batches
from spark_log.records.batch_header import BatchHeader
from spark_log.storage.cleaner.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from tests.broker.txn_support import unique, wait_until
from tests.broker_process import BrokerProcess

# Fast cleaning for tests: short backoff; .deleted files go at once.
CLEANER_BROKER_CONFIG = {"log.cleaner.backoff.ms": "50", "log.segment.delete.delay.ms": "0"}
DEADLINE_S = 60.0
Update = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class Message:
    offset: int
    key: bytes | None
    value: bytes | None


def create_compacted(broker: BrokerProcess, prefix: str, **configs: str) -> str:
    """A one-partition compacted topic with small segments (override with `configs`)."""
    name = unique(prefix)
    props = {"cleanup.policy": "compact", "internal.segment.bytes": str(64 << 10),
             "min.cleanable.dirty.ratio": "0.1", "segment.ms": "500",
             **{k.replace("_", "."): v for k, v in configs.items()}}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=props)])[name].result(timeout=30)
    return name


def produce(broker: BrokerProcess, topic: str, updates: list[Update], *,
            idempotent: bool = False) -> list[Message]:
    """Produce `updates` in order (acks=all); returns each with the offset it got."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "enable.idempotence": idempotent, "acks": "all",
                         "batch.num.messages": 500})
    delivered: list[Message] = []
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(Message(msg.offset(), msg.key(), msg.value()))  # type: ignore

    for key, value in updates:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(DEADLINE_S) == 0 and not errors, errors
    return sorted(delivered, key=lambda m: m.offset)


class Reader:
    """A consumer of partition 0 of `topic` that reads it again and again from any offset."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap,
                                  "group.id": unique("reader"), "enable.auto.commit": False,
                                  "enable.partition.eof": True})

    def read(self, start: int = OFFSET_BEGINNING) -> list[Message]:
        """Every message from `start` up to the high watermark."""
        tp = TopicPartition(self.topic, 0)
        _, high = self.consumer.get_watermark_offsets(tp, timeout=30)
        self.consumer.assign([TopicPartition(self.topic, 0, start)])
        out: list[Message] = []
        deadline = time.monotonic() + DEADLINE_S
        while high > 0:
            assert time.monotonic() < deadline, f"read {len(out)} messages of {tp} only"
            msg = self.consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
                if self.consumer.position([tp])[0].offset >= high:
                    break
                continue
            out.append(Message(msg.offset(), msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                break
        return out

    def close(self) -> None:
        self.consumer.close()


def consume(broker: BrokerProcess, topic: str, start: int = OFFSET_BEGINNING
            ) -> list[Message]:
    """Every message from `start` up to the high watermark, with a new consumer."""
    reader = Reader(broker, topic)
    try:
        return reader.read(start)
    finally:
        reader.close()


def latest(updates: list[Update]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for key, value in updates:
        out[key] = value
    return out


def partition_dir(broker: BrokerProcess, topic: str) -> Path:
    return broker.data_dir / f"{topic}-0"


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


def log_bytes(directory: Path) -> int:
    """Bytes of the partition's segment files."""
    total = 0
    for path in directory.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # swapped away meanwhile
            total += path.stat().st_size
    return total


def cleaner_checkpoint(broker: BrokerProcess, topic: str) -> int | None:
    """The partition's entry in the broker's cleaner-offset-checkpoint file."""
    try:
        lines = (broker.data_dir / CLEANER_OFFSET_CHECKPOINT).read_text().split("\n")
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
            return int(parts[2])
    return None


def roll_past(broker: BrokerProcess, topic: str, offset: int) -> None:
    """Append markers until the active segment starts after `offset` (segment.ms rolls it)."""
    directory = partition_dir(broker, topic)
    wait_until(lambda: produce(broker, topic, [(b"roll", b"x")]) and
               segment_bases(directory)[-1] > offset, DEADLINE_S, f"a roll past {offset}")


def cleaned_through(broker: BrokerProcess, topic: str, offset: int) -> None:
    """Wait until the cleaner checkpoint of the partition is past `offset`."""
    wait_until(lambda: (cleaner_checkpoint(broker, topic) or 0) > offset, DEADLINE_S,
               f"cleaning past offset {offset}")


def batches_on_disk(directory: Path) -> list[BatchHeader]:
    """Headers of every batch in the partition's segment files, in offset order."""
    headers: list[BatchHeader] = []
    for base in segment_bases(directory):
        path = directory / f"{base:020d}.log"
        with open(path, "rb") as f:
            data = f.read()
        headers += [view.header for view in iter_batches(data)]
    return headers


def has_cleaning_files(directory: Path) -> bool:
    try:
        return any(n.endswith((".cleaned", ".swap")) for n in os.listdir(directory))
    except FileNotFoundError:
        return False
