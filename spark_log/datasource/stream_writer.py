"""Streaming writes (writeStream.format("pylog")): each micro-batch's tasks produce their rows.

Same schema rules, producer settings and at-least-once guarantee as batch writes (`writer`):
a micro-batch replayed after a failure is produced again. `commit(messages, batchId)` is where a
transactional mode will commit each epoch's transactions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .writer import PylogCommitMessage, WritePlan, produce_batches

log = logging.getLogger(__name__)


class PylogStreamWriter(DataSourceStreamArrowWriter):
    """Writes every micro-batch to Kafka; the plan (address, topic, columns) is fixed at start."""

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
