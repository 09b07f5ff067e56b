"""The driver side of exactly-once writes: prepare a micro-batch, commit it, or abort it.

PySpark runs each step in a Python worker of the driver: `prepare_batch` where it plans the
batch's write (before any task starts), `commit_batch` / `abort_batch` in the sink commit runner
(a fresh writer, so everything they need travels in the tasks' commit messages or is read back
from Kafka).

prepare: finish a pending decision of an earlier run (`txn_recovery.finish_decision`), fence task
transactions left open (a dead run's, a failed attempt's), open the batch barrier; the commit
log's state goes to the tasks so a replayed, already decided batch is not written again.

commit: record the decision (`commit_log`), commit every task's transaction — the one carrying
the source group's offsets last — abort the barrier (the batch becomes readable at once), mark
the decision done. A transaction found gone after the decision cannot be committed: the pointer
names its task, the commit fails, and the replay writes that task again.

abort: a batch whose decision is recorded is finished, never aborted (Spark also calls abort
when commit itself failed); otherwise every open transaction of the query is fenced and the
barrier ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from spark_log.client.group_offsets import GroupOffsetsClient
from spark_log.client.transactions import TransactionClient, TransactionError

from .batch_barrier import open_barrier, output_partitions
from .commit_log import PENDING, CommitLog, Decision
from .txn_ids import TxnRef, barrier_id
from .txn_options import TxnOptions
from .txn_recovery import end_all, end_barrier, fence_stale, finish_decision
from .txn_task import TxnCommitMessage, TxnPlan

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0


class LostTransactionsError(RuntimeError):
    """Some task transactions of a decided micro-batch were aborted before their commit."""


def prepare_batch(bootstrap: str, kafka_conf: Mapping[str, str], topic: str | None,
                  txn: TxnOptions) -> TxnPlan:
    with TransactionClient(bootstrap, TIMEOUT_S) as client, \
            GroupOffsetsClient(bootstrap, TIMEOUT_S) as groups:
        commits = CommitLog(groups, txn.prefix)
        commits.ensure_topic(kafka_conf)
        state = commits.state()
        if state.status == PENDING:
            log.warning("finishing the commit of micro-batch %d left pending by an earlier run",
                        state.batch)
            state = finish_decision(commits, client, state, kafka_conf)
        fence_stale(client, txn.prefix, txn.timeout_ms)
        partitions = output_partitions(client, [topic] if topic else [])
        barrier = open_barrier(client, txn.prefix, partitions, txn.timeout_ms)
    return TxnPlan(txn.prefix, txn.timeout_ms, state, barrier, txn.source_groups)


def commit_order(messages: Sequence[TxnCommitMessage]) -> tuple[TxnRef, ...]:
    """Every open transaction, the ones carrying consumer group offsets last (so the group's
    offsets move only once all of the batch's output is committed)."""
    written = [m for m in messages if m.txn is not None]
    written.sort(key=lambda m: (bool(m.groups), m.task))
    return tuple(m.txn for m in written if m.txn is not None)


def commit_batch(bootstrap: str, kafka_conf: Mapping[str, str], txn: TxnOptions,
                 messages: Sequence[Any], batch_id: int) -> int:
    """Commit micro-batch `batch_id`; returns the number of rows made visible."""
    ours = [m for m in messages if isinstance(m, TxnCommitMessage)]
    entries = commit_order(ours)
    with TransactionClient(bootstrap, TIMEOUT_S) as client, \
            GroupOffsetsClient(bootstrap, TIMEOUT_S) as groups:
        barrier = _barrier(ours, client, txn.prefix)
        if not entries:
            end_barrier(client, barrier)
            return 0
        commits = CommitLog(groups, txn.prefix)
        state = commits.decide(Decision(ours[0].query_id, batch_id, entries, barrier))
        lost = end_all(client, entries, commit=True)
        end_barrier(client, barrier)
        commits.finish(state, tuple(ref.task for ref in lost))
    if lost:
        raise LostTransactionsError(
            f"micro-batch {batch_id}: the transactions of tasks {[r.task for r in lost]} were "
            "aborted before the driver committed them (fenced by another attempt of the task, "
            "or older than kafka.transaction.timeout.ms); the batch fails and its replay "
            "writes those tasks again")
    return sum(m.rows for m in ours if m.txn is not None)


def abort_batch(bootstrap: str, kafka_conf: Mapping[str, str], txn: TxnOptions,
                messages: Sequence[Any], batch_id: int) -> bool:
    """Abort micro-batch `batch_id`, or finish its commit if it was decided; returns True in
    that case."""
    with TransactionClient(bootstrap, TIMEOUT_S) as client, \
            GroupOffsetsClient(bootstrap, TIMEOUT_S) as groups:
        commits = CommitLog(groups, txn.prefix)
        state = commits.state()
        decided = state.status == PENDING
        if decided:
            finish_decision(commits, client, state, kafka_conf)
        fence_stale(client, txn.prefix, txn.timeout_ms)
        client.fence(barrier_id(txn.prefix), txn.timeout_ms)
    return decided and state.batch == batch_id


def _barrier(messages: Sequence[TxnCommitMessage], client: TransactionClient,
             prefix: str) -> TxnRef | None:
    """The batch's barrier as the tasks received it; asked of the coordinator when no task ran."""
    barrier = next((m.barrier for m in messages if m.barrier is not None), None)
    if barrier is not None or messages:
        return barrier
    try:
        info = client.describe(barrier_id(prefix))
    except TransactionError:  # no barrier was ever opened (no topic option)
        return None
    if info.state != "Ongoing":
        return None
    return TxnRef(info.transactional_id, info.producer_id, info.producer_epoch)
