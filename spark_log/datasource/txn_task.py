"""The task side of exactly-once writes: one micro-batch task's rows in one transaction, left
open for the driver to commit.

A task learns from Spark's task context which query (Spark's query id, kept in the checkpoint),
micro-batch and partition it is. If the commit log says that batch is already decided (a replay
after the driver died between its commit decision and Spark's own commit record), the task
writes nothing. Otherwise it initialises a transactional producer with the task's transactional
id `<prefix>-task-<partition>` — fencing every earlier attempt of the same task and aborting
what it left open — reads its producer id and epoch from the coordinator right after
(librdkafka does not expose them; the order matters: an attempt fenced after that fails to
write or to commit, never commits another attempt's data), produces its rows, in task 0 also
commits the source group's offsets of the batch (`planned_offsets`), flushes and returns
(transactional id, producer id, epoch) in its commit message without committing. The producer
is then dropped: librdkafka does not abort an open transaction when a producer is destroyed.
A task with no rows (and no offsets to commit) opens no transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from .commit_log import SinkState
from .txn_ids import TxnRef, task_id
from .writer import Deliveries, PylogCommitMessage, WritePlan, flush, send_batches

QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


@dataclass(frozen=True)
class TxnPlan:
    """What every task of one micro-batch needs, fixed on the driver before the batch runs.
    Invariant: `state` is the commit log after every earlier decision was finished."""

    prefix: str
    timeout_ms: int
    state: SinkState
    barrier: TxnRef | None
    source_groups: tuple[str, ...] = ()


@dataclass
class TxnCommitMessage(PylogCommitMessage):
    """A task's part of a micro-batch: its open transaction (None when it wrote nothing), or
    `skipped` when the batch was decided before (a replay)."""

    query_id: str = ""
    batch: int = -1
    task: int = -1
    attempt: int = 0
    txn: TxnRef | None = None
    skipped: bool = False
    barrier: TxnRef | None = None
    groups: tuple[str, ...] = ()  # consumer groups whose offsets the transaction commits


@dataclass(frozen=True)
class TaskInfo:
    """Who this task is, from Spark's task context."""

    query_id: str
    batch: int
    task: int
    attempt: int


def task_info() -> TaskInfo:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query = ctx.getLocalProperty(QUERY_ID) if ctx else None
    batch = ctx.getLocalProperty(BATCH_ID) if ctx else None
    if ctx is None or query is None or batch is None:
        raise RuntimeError("exactly-once pylog writes run in micro-batch streaming queries "
                           "only (no streaming query id or batch id in the task context)")
    return TaskInfo(query, int(batch), ctx.partitionId(), ctx.attemptNumber())


def write_in_transaction(plan: WritePlan, txn: TxnPlan, batches: Iterator[Any]
                         ) -> TxnCommitMessage:
    info = task_info()
    message = TxnCommitMessage(query_id=info.query_id, batch=info.batch, task=info.task,
                               attempt=info.attempt, barrier=txn.barrier)
    if txn.state.already_written(info.query_id, info.batch, info.task):
        for _ in batches:  # Spark's Arrow runner expects its input read to the end
            pass
        message.skipped = True
        return message
    offsets = _planned_offsets(plan, txn) if info.task == 0 else {}
    first = _first_rows(batches)
    if first is None and not offsets:
        return message
    session = _TaskTransaction(plan, task_id(txn.prefix, info.task), txn.timeout_ms, info.task)
    rows = session.send(chain([first], batches) if first is not None else iter(()))
    for group, group_offsets in offsets.items():
        session.commit_offsets(group, group_offsets)
    message.txn = session.prepare()
    message.rows, message.last_offsets = rows, dict(session.deliveries.last)
    message.groups = tuple(offsets)
    return message


def connect(producer: Any, timeout_s: float) -> None:
    """Have a new librdkafka producer connect (a metadata request) before init_transactions:
    initialising before any broker connection is up often waits for a 500 ms retry timer."""
    producer.list_topics(timeout=timeout_s)


def _first_rows(batches: Iterator[Any]) -> Any:
    """The first non-empty batch (consumed from `batches`), or None."""
    return next((b for b in batches if b.num_rows), None)


def _planned_offsets(plan: WritePlan, txn: TxnPlan) -> dict[str, dict[tuple[str, int], int]]:
    if not txn.source_groups:
        return {}
    from spark_log.client.group_offsets import GroupOffsetsClient

    from .planned_offsets import read_planned

    with GroupOffsetsClient(plan.bootstrap) as client:
        return {group: read_planned(client, group) for group in txn.source_groups}


class _TaskTransaction:
    """One attempt's transaction: open on creation, `prepare` flushes and hands it over.
    Invariant: `ref` holds the (producer id, epoch) this producer initialised."""

    def __init__(self, plan: WritePlan, transactional_id: str, timeout_ms: int,
                 task: int) -> None:
        from confluent_kafka import Producer

        from spark_log.client.transactions import TransactionClient

        from .client import producer_conf

        self.plan = plan
        self.deliveries = Deliveries()
        conf = producer_conf(plan.bootstrap, plan.kafka_conf)
        conf.update({"transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms,
                     "on_delivery": self.deliveries})
        self.producer = Producer(conf)
        connect(self.producer, 30.0)
        self.producer.init_transactions(30.0)
        with TransactionClient(plan.bootstrap) as client:
            info = client.describe(transactional_id)
        self.ref = TxnRef(transactional_id, info.producer_id, info.producer_epoch, task)
        self.producer.begin_transaction()

    def send(self, batches: Iterator[Any]) -> int:
        return send_batches(self.producer, self.plan, batches, self.deliveries)

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KTP

        from .client import base_conf

        consumer = Consumer({**base_conf(self.plan.bootstrap, {}), "group.id": group})
        try:
            self.producer.send_offsets_to_transaction(
                [KTP(t, p, off) for (t, p), off in sorted(offsets.items())],
                consumer.consumer_group_metadata(), 30.0)
        finally:
            consumer.close()

    def prepare(self) -> TxnRef:
        """Flush (raising the first delivery error) and leave the transaction open."""
        flush(self.producer, self.plan, self.deliveries)
        return self.ref
