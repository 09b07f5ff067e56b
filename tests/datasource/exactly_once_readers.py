"""What consumers see of the exactly-once tests' output topic, read with confluent-kafka.

`read_values` reads a topic once, up to the end offsets it looks up first. `SnapshotReader` reads
it the whole time a query writes it and takes snapshots: the end offsets of every partition
looked up in one ListOffsets request (the log end for read_uncommitted, the last stable offset
for read_committed), then every row below them. What a consumer with that isolation level could
have seen at that instant is exactly those rows, so a micro-batch whose row count at a snapshot
differs from its final count was seen partially (or with rows that were later aborted).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from typing import Any

SNAPSHOT_LIMIT_S = 60.0
SNAPSHOT_EVERY_S = 0.05  # sampling pace: a reader in a tight loop would starve the query


def _isolation(name: str) -> Any:
    from confluent_kafka import IsolationLevel

    return (IsolationLevel.READ_COMMITTED if name == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED)


def end_offsets(admin: Any, topic: str, partitions: list[int], isolation: str
                ) -> dict[int, int]:
    """Every partition's end as a consumer with `isolation` sees it, in one request."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                                  for p in partitions}, isolation_level=_isolation(isolation))
    return {tp.partition: f.result(30).offset for tp, f in futures.items()}


def _consumer(bootstrap: str, isolation: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-test-reader",
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "log_level": 3})


def read_values(bootstrap: str, topic: str, isolation: str, deadline: float
                ) -> Iterator[bytes]:
    """Every value in `topic` as a consumer with `isolation` sees it now (up to the end
    offsets looked up first); raises if they cannot be read by `deadline`."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    partitions = list(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    todo = {p: end for p, end in end_offsets(admin, topic, partitions, isolation).items()
            if end > 0}
    consumer = _consumer(bootstrap, isolation)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None and msg.offset() < todo.get(msg.partition(), 0):
                    yield msg.value()
            for tp in consumer.position([TopicPartition(topic, p) for p in list(todo)]):
                if tp.offset >= todo[tp.partition]:
                    del todo[tp.partition]
    finally:
        consumer.close()
    assert not todo, f"could not read {topic} up to {todo} in time"


def batch_of(row: dict[str, Any]) -> int:
    """The micro-batch that wrote an output row (its tag is "batch:task:attempt")."""
    return int(row["at"].split(":")[0])


class SnapshotReader(threading.Thread):
    """Reads `topic` with `isolation` until stopped, taking snapshot after snapshot.

    Invariants: `counts[b]` is the number of rows of micro-batch b below the last snapshot's
    ends; `observed[b]` holds every value `counts[b]` had at a snapshot; rows at or beyond the
    last ends wait in `_pending` for the snapshot that covers them."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str) -> None:
        super().__init__(name=f"snapshot-reader-{isolation}", daemon=True)
        self.bootstrap, self.topic, self.isolation = bootstrap, topic, isolation
        self.partitions = list(range(partitions))
        self.counts: Counter[int] = Counter()
        self.observed: dict[int, set[int]] = defaultdict(set)
        self.snapshots = 0
        self.error: BaseException | None = None
        self._pending: dict[int, deque[tuple[int, bytes | None]]] = {
            p: deque() for p in self.partitions}
        self._next = dict.fromkeys(self.partitions, 0)  # past the last record consumed
        self._stopping = threading.Event()

    def finish(self) -> None:
        """Stop after the snapshot under way; raise what the reader failed with."""
        self._stopping.set()
        self.join(SNAPSHOT_LIMIT_S + 30)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error

    def mismatches(self, final: Counter[int]) -> dict[int, list[int]]:
        """Micro-batches seen at some snapshot with a row count other than `final`'s."""
        return {b: sorted(seen) for b, seen in self.observed.items()
                if any(n != final[b] for n in seen)}

    def run(self) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        consumer = _consumer(self.bootstrap, self.isolation)
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in self.partitions])
            while not self._stopping.is_set():
                self._snapshot(admin, consumer)
                self._stopping.wait(SNAPSHOT_EVERY_S)
        except BaseException as e:  # handed to the test by finish()
            self.error = e
        finally:
            consumer.close()

    def _snapshot(self, admin: Any, consumer: Any) -> None:
        ends = end_offsets(admin, self.topic, self.partitions, self.isolation)
        deadline = time.monotonic() + SNAPSHOT_LIMIT_S
        while not self._reached(consumer, ends):
            if self._stopping.is_set():
                return
            assert time.monotonic() < deadline, f"{self.name}: {ends} not reached in time"
            for msg in consumer.consume(1000, 0.1):
                if msg.error() is None:
                    self._pending[msg.partition()].append((msg.offset(), msg.value()))
                    self._next[msg.partition()] = msg.offset() + 1
        changed = set()
        for partition, end in ends.items():
            pending = self._pending[partition]
            while pending and pending[0][0] < end:
                value = pending.popleft()[1]
                if value:  # batch barrier records have no value
                    batch = batch_of(json.loads(value))
                    self.counts[batch] += 1
                    changed.add(batch)
        for batch in changed:
            self.observed[batch].add(self.counts[batch])
        self.snapshots += 1

    def _reached(self, consumer: Any, ends: dict[int, int]) -> bool:
        from confluent_kafka import TopicPartition

        positions = consumer.position([TopicPartition(self.topic, p) for p in ends])
        return all(max(tp.offset, self._next[tp.partition]) >= ends[tp.partition]
                   for tp in positions)
