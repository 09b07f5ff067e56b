"""The batch barrier: what makes a micro-batch visible to read_committed consumers all at once.

Each write task commits its own transaction, and the driver ends them one EndTxn at a time; a
read_committed consumer reading between two of them would see some tasks' rows of the batch and
not others'. Before any task of a micro-batch writes, the driver opens one more transaction, the
barrier, with one small record in every partition of the output topic. A partition's last stable
offset cannot pass the first record of an open transaction, so nothing written after the barrier
is readable under read_committed — even once committed — until the barrier ends. The driver
commits every task's transaction, then aborts the barrier: the whole batch becomes readable in
one step, exactly as one Kafka transaction spanning those partitions would. The barrier's
records are aborted, so read_committed consumers never see them (read_uncommitted ones see a
record with key `__pylog_barrier` and an empty value per partition and batch, among the aborted
data they see anyway).

The barrier's transactional id is the query's, so opening a barrier fences and aborts whatever
barrier a dead run left open.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_log.client.record_writer import append
from spark_log.client.transactions import TransactionClient

from .txn_ids import TxnRef, barrier_id

BARRIER_KEY = b"__pylog_barrier"


def output_partitions(client: TransactionClient, topics: Sequence[str]) -> list[tuple[str, int]]:
    """Every partition of `topics`. A missing topic is auto-created if the cluster allows it,
    as the tasks' producers would create it anyway: the barrier then covers its first batch
    too (partitions without a leader yet are left out)."""
    return sorted(client.leaders(topics, create=True)) if topics else []


def open_barrier(client: TransactionClient, prefix: str, partitions: Sequence[tuple[str, int]],
                 timeout_ms: int) -> TxnRef | None:
    """Open the query's barrier over `partitions` and leave it open; None when there is
    nothing to cover. Plain requests (InitProducerId, AddPartitionsToTxn, one Produce per
    leader), no producer client: a barrier is a few records."""
    if not partitions:
        return None
    tid = barrier_id(prefix)
    producer_id, epoch = client.fence(tid, timeout_ms)
    client.add_partitions(tid, producer_id, epoch, list(partitions))
    append(client, {tp: [(BARRIER_KEY, b"")] for tp in partitions}, transactional_id=tid,
           producer_id=producer_id, epoch=epoch)
    return TxnRef(tid, producer_id, epoch)
