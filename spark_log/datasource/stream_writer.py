"""Streaming writes (writeStream.format("pylog")): at least once, or exactly once.

`PylogStreamWriter` (exactlyOnce=false): each micro-batch's tasks produce their rows with an
idempotent producer, as batch writes do (`writer`); a micro-batch replayed after a failure, or a
retried task, is produced again.

`PylogTxnStreamWriter` (exactlyOnce=true, the default): two-phase commit over Kafka
transactions. PySpark creates the stream writer in three places, and each does its part:
the driver's write planning, before every micro-batch (`prepare`: finish what an earlier run left
pending, fence leftovers, open the batch barrier — `txn_commit.prepare_batch`); the tasks, which
receive that writer pickled (`write`: one open transaction per task — `txn_task`); the driver's
sink commit runner (`commit` / `abort` — `txn_commit`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .txn_options import TxnOptions
from .txn_task import TxnPlan
from .writer import PylogCommitMessage, WritePlan, produce_batches

log = logging.getLogger(__name__)


class PylogStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once: writes every micro-batch; the plan (address, topic, columns) is fixed."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> PylogCommitMessage:
        return produce_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PylogCommitMessage))
        log.info("pylog micro-batch %d wrote %d records", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("pylog micro-batch %d aborted; records already written stay in the log",
                    batchId)


class PylogTxnStreamWriter(DataSourceStreamArrowWriter):
    """Exactly-once. Invariant: `batch` is set (by `prepare`, on the driver) before the writer
    is sent to tasks; commit and abort need only the options and the commit messages."""

    def __init__(self, plan: WritePlan, txn: TxnOptions) -> None:
        self.plan = plan
        self.txn = txn
        self.batch: TxnPlan | None = None

    def prepare(self) -> None:
        from .txn_commit import prepare_batch

        self.batch = prepare_batch(self.plan.bootstrap, self.plan.kafka_conf, self.plan.topic,
                                   self.txn)

    def write(self, iterator: Iterator[Any]) -> PylogCommitMessage:
        from .txn_task import write_in_transaction

        if self.batch is None:
            raise RuntimeError("the exactly-once pylog writer reached a task unprepared")
        return write_in_transaction(self.plan, self.batch, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from .txn_commit import commit_batch

        rows = commit_batch(self.plan.bootstrap, self.plan.kafka_conf, self.txn, messages,
                            batchId)
        log.info("pylog micro-batch %d committed %d records", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from .txn_commit import abort_batch

        if abort_batch(self.plan.bootstrap, self.plan.kafka_conf, self.txn, messages, batchId):
            log.warning("pylog micro-batch %d failed after its commit was decided: committed",
                        batchId)
        else:
            log.warning("pylog micro-batch %d aborted: none of its rows is visible to "
                        "read_committed consumers", batchId)
