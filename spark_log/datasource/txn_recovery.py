"""Finishing what an earlier run (or an earlier step of this one) left behind, on the driver.

* `end_all` ends transactions by (transactional id, producer id, epoch) and sorts the failures:
  a transaction that is gone — fenced by a newer epoch, aborted by the coordinator at its
  timeout, or already ended the other way — is *lost*; anything else (the cluster unreachable,
  a coordinator moving) raises, and the caller tries again later.
* `finish_decision` rolls a pending commit decision forward: every transaction of the decided
  batch is committed (a repeated commit is harmless), then its barrier is aborted, then the
  pointer says done, naming the tasks whose transaction was lost.
* `fence_stale` fences every task transaction of the query that is still open (ListTransactions
  on every broker, then InitProducerId per id): transactions of tasks that died, of a dead run,
  of zombies. It runs only when no transaction of the query may legitimately be open.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from spark_log.client.transactions import TransactionClient, TransactionError
from spark_log.protocol import ErrorCode

from .commit_log import CommitLog, SinkState
from .txn_ids import TxnRef, is_task_id, task_prefix

log = logging.getLogger(__name__)

GONE = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                  ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_id_mapping,
                  ErrorCode.transactional_id_not_found})


def end_all(client: TransactionClient, refs: Sequence[TxnRef], commit: bool) -> list[TxnRef]:
    """End every transaction of `refs`, in order; returns the ones that were gone."""
    lost = []
    for ref in refs:
        try:
            client.end(ref.transactional_id, ref.producer_id, ref.epoch, commit)
        except TransactionError as e:
            if e.code not in GONE:
                raise
            lost.append(ref)
    return lost


def end_barrier(client: TransactionClient, barrier: TxnRef | None) -> None:
    """Abort the barrier; one that is gone already (a newer barrier fenced it, or its timeout
    passed) no longer holds anything back."""
    if barrier is not None and end_all(client, [barrier], commit=False):
        log.info("batch barrier %s (epoch %d) had already ended", barrier.transactional_id,
                 barrier.epoch)


def finish_decision(commits: CommitLog, client: TransactionClient, state: SinkState,
                    kafka_conf: Mapping[str, str]) -> SinkState:
    """Commit every transaction of the pending decision `state` points at; returns the new
    (done) state."""
    decision = commits.load(state, kafka_conf)
    lost = end_all(client, decision.entries, commit=True)
    if lost:
        log.error(
            "micro-batch %d: the transactions of tasks %s were aborted before the commit "
            "decision reached them (transaction.timeout.ms passed, or a zombie task fenced them)"
            "; those tasks' rows are written again when the batch is replayed (this relies on "
            "the replay giving each task the same rows)", decision.batch,
            [ref.task for ref in lost])
    end_barrier(client, decision.barrier)
    return commits.finish(state, tuple(ref.task for ref in lost))


def fence_stale(client: TransactionClient, prefix: str, timeout_ms: int) -> list[str]:
    """Fence and abort every open task transaction of the query; returns their ids."""
    try:
        stale = [tid for tid, _pid, _state in client.list_open(task_prefix(prefix))
                 if is_task_id(prefix, tid)]
    except (OSError, TransactionError) as e:
        log.warning("cannot list open transactions (ListTransactions needs Kafka 3.0+): %s; "
                    "transactions left open by failed tasks end at their timeout or when their "
                    "task runs again", e)
        return []
    for tid in stale:
        client.fence(tid, timeout_ms)
    if stale:
        log.info("fenced %d transaction(s) left open: %s", len(stale), ", ".join(stale))
    return stale
