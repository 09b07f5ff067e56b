"""Read-process-write: handing a micro-batch's source offsets to the sink's transactions.

A pylog source and a pylog sink of one query run in different Python processes and Spark passes
nothing between them, so the source publishes, and the sink looks up, through Kafka:

* the source (`commitOffsets=transactional`, an explicit `groupId` G) publishes the end offsets
  of every micro-batch it is about to read — in `partitions(start, end)`, which Spark calls for
  every batch it executes, replays included — as the committed offsets of the helper group
  `G.pylog-planned`; it never commits G itself;
* the sink (`sourceGroupId=G`) reads them in its first task and commits them to G with
  TxnOffsetCommit inside that task's transaction, which the driver commits last of the batch.

Spark executes micro-batches one after another and plans batch N+1 only after batch N is
committed, so while batch N's tasks run, the published offsets are batch N's. G's committed
offsets therefore change only when a batch's output is committed, and always to that batch's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import PylogOptionError

TopicPartition = tuple[str, int]


def planned_group(group: str) -> str:
    return f"{group}.pylog-planned"


def publish(cluster: Any, group: str, end: Mapping[TopicPartition, int]) -> None:
    """Source side: record `end` as the batch about to run (synchronous)."""
    if end:
        cluster.commit(planned_group(group), end)


def read_planned(client: Any, group: str) -> dict[TopicPartition, int]:
    """Sink side: the end offsets the source of group `group` published last (`client`: a
    GroupOffsetsClient)."""
    offsets = {tp: offset for tp, (offset, _meta) in client.fetch(planned_group(group)).items()}
    if not offsets:
        raise PylogOptionError(
            f"Option 'sourceGroupId' names group {group!r}, but no pylog source published the "
            f"offsets of its micro-batches for it: read with .option('groupId', {group!r}) and "
            ".option('commitOffsets', 'transactional').")
    return offsets
