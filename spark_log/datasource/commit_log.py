"""The exactly-once sink's commit decisions: durable, in Kafka, so any run of the query can finish
what a dead one started.

Before the driver ends any transaction of micro-batch N it appends a decision record to the
compacted topic `__pylog_sink_commits` (key: the query's prefix; value: query id, batch id and
every transaction to commit with its producer id and epoch), then points the group
`<prefix>.sink` at it: the group's committed offset on partition 0 is the record's offset + 1 and
its metadata says `pending`. Once every transaction is ended the metadata becomes `done` (with
the tasks whose transaction was lost, if any). The pointer is one OffsetFetch away, so the
driver reads it before every micro-batch; the record is read only to finish a pending decision.
A crash before the pointer is written leaves an orphan record and no decision: nothing was
committed, the batch is written again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from spark_log.client.group_offsets import GroupOffsetsClient
from spark_log.client.record_writer import append

from .client import base_conf, consumer_conf
from .errors import PylogConnectionError
from .txn_ids import COMMITS_TOPIC, TxnRef, state_group

PENDING, DONE = "pending", "done"
POINTER = (COMMITS_TOPIC, 0)
COMMITS_REPLICATION = 3  # offsets.topic.replication.factor's default


@dataclass(frozen=True)
class SinkState:
    """What the pointer says: the query's latest decided batch (-1: none yet), whether its
    transactions are all ended, and which tasks' transactions were lost (to be written again).
    Invariant: `record` >= 0 whenever `batch` >= 0."""

    query_id: str = ""
    batch: int = -1
    status: str = DONE
    lost: tuple[int, ...] = ()
    record: int = -1

    def already_written(self, query_id: str, batch: int, task: int) -> bool:
        """True when task `task` of micro-batch `batch` of query `query_id` is part of a
        decided batch: a replay must not write it again."""
        if query_id != self.query_id or self.batch < 0:
            return False
        return batch < self.batch or (batch == self.batch and task not in self.lost)


@dataclass(frozen=True)
class Decision:
    """A micro-batch's commit: end `entries` in order (the transaction carrying the source
    group's offsets last), then the barrier."""

    query_id: str
    batch: int
    entries: tuple[TxnRef, ...]
    barrier: TxnRef | None

    def to_bytes(self) -> bytes:
        return json.dumps({"query": self.query_id, "batch": self.batch,
                           "entries": [e.to_json() for e in self.entries],
                           "barrier": self.barrier.to_json() if self.barrier else None}).encode()

    @staticmethod
    def from_bytes(data: bytes) -> Decision:
        value = json.loads(data)
        barrier = value.get("barrier")
        return Decision(value["query"], int(value["batch"]),
                        tuple(TxnRef.from_json(e) for e in value["entries"]),
                        TxnRef.from_json(barrier) if barrier else None)


class CommitLog:
    """Reads and moves one query's pointer, through `client` (which the caller closes)."""

    def __init__(self, client: GroupOffsetsClient, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.group = state_group(prefix)

    def ensure_topic(self, kafka_conf: Mapping[str, str]) -> None:
        """Create `__pylog_sink_commits` (one partition, compacted) unless it exists, on as
        many brokers as Kafka's internal topics (3), or every broker of a smaller cluster: the
        decisions must outlive a broker."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        if self.client.leaders([COMMITS_TOPIC]):
            return
        admin = AdminClient(base_conf(self.client.bootstrap, _plain(kafka_conf)))
        replicas = min(COMMITS_REPLICATION, len(self.client.brokers()))
        topic = NewTopic(COMMITS_TOPIC, 1, replicas, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([topic])[COMMITS_TOPIC].result(self.client.timeout_s)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise PylogConnectionError(
                    f"Cannot create topic {COMMITS_TOPIC} on {self.client.bootstrap} (the "
                    f"exactly-once sink keeps its commit decisions there): {e.args[0].str()}"
                ) from None

    def state(self) -> SinkState:
        committed = self.client.fetch(self.group, [POINTER]).get(POINTER)
        if committed is None or not committed[1]:
            return SinkState()
        offset, metadata = committed
        meta = json.loads(metadata or "{}")
        return SinkState(meta["q"], int(meta["b"]), meta["s"], tuple(meta.get("lost", ())),
                         offset - 1)

    def decide(self, decision: Decision) -> SinkState:
        """Append the decision, then point at it (pending). After this returns, every run of
        the query finishes the decision rather than writing the batch again."""
        offsets = append(self.client, {POINTER: [(self.prefix.encode(), decision.to_bytes())]})
        state = SinkState(decision.query_id, decision.batch, PENDING, (), offsets[POINTER])
        self._point(state)
        return state

    def finish(self, state: SinkState, lost: tuple[int, ...]) -> SinkState:
        done = SinkState(state.query_id, state.batch, DONE, tuple(sorted(lost)), state.record)
        self._point(done)
        return done

    def load(self, state: SinkState, kafka_conf: Mapping[str, str]) -> Decision:
        """The decision record the pointer designates."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KTP

        conf = consumer_conf(self.client.bootstrap, _plain(kafka_conf))
        conf["isolation.level"] = "read_uncommitted"
        consumer = Consumer(conf)
        try:
            consumer.assign([KTP(COMMITS_TOPIC, 0, state.record)])
            deadline = time.monotonic() + self.client.timeout_s
            while time.monotonic() < deadline:
                for msg in consumer.consume(1, 0.5):
                    if msg.error() is None and msg.offset() == state.record:
                        return Decision.from_bytes(msg.value())
        finally:
            consumer.close()
        raise PylogConnectionError(
            f"Cannot read the commit decision of batch {state.batch} at {COMMITS_TOPIC} offset "
            f"{state.record} on {self.client.bootstrap}.")

    def _point(self, state: SinkState) -> None:
        meta = json.dumps({"q": state.query_id, "b": state.batch, "s": state.status,
                           "lost": list(state.lost)}, separators=(",", ":"))
        self.client.commit(self.group, {POINTER: (state.record + 1, meta)})


def _plain(kafka_conf: Mapping[str, str]) -> dict[str, str]:
    """Client settings without the ones meant for the data producers and consumers."""
    drop = ("transaction.timeout.ms", "transactional.id", "isolation.level", "group.id")
    return {k: v for k, v in kafka_conf.items() if k not in drop}
