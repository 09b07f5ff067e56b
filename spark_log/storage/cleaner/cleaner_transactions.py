"""How compaction treats transactions and producer state (Kafka's CleanedTransactionMetadata and
the batch half of the cleaner's RecordFilter): the `BatchPolicyFactory` the broker gives the
log cleaner.

Per walk the policy knows, from the transaction indexes, every aborted transaction overlapping
the walk (producer id, first offset, marker offset), and, from the producer state, where each
active producer's last batch is. Walking batches in offset order it tracks which transactions
are open:

* a transactional data batch of a producer whose earliest not-yet-ended aborted transaction
  began at or before it belongs to that aborted transaction: its records are discarded and it
  never enters the offset map (so it cannot shadow a committed value of its key);
* any other transactional data batch belongs to a transaction that was committed;
* a marker is an ABORT if the index lists an aborted transaction ending at it, else a COMMIT
  (an empty aborted transaction is not indexed, and behaves like an empty committed one). A
  marker stays while any batch of its transaction is still in the log; once none is, it gets
  a delete horizon like a tombstone (delete.retention.ms), and after that it is removed;
* the batch holding an active producer's last sequence, and the marker carrying its latest
  epoch when it has no data batch, are kept (empty if need be) so producer state can be rebuilt
  from the log.

The cleaner keeps the index entries of markers it keeps; LSO bounds what is cleaned, so no
open transaction is ever touched.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from spark_log.records.batch_header import BatchHeader
from spark_log.storage.cleaner.cleaner_batch_policy import BatchDecision, BatchRetention
from spark_log.storage.index.transaction_index import AbortedTxn
from spark_log.storage.producer_state.producer_state_entry import NO_OFFSET

if TYPE_CHECKING:
    from spark_log.storage.log.partition_log import PartitionLog


class TransactionalBatchPolicy:
    """One walk's view of transactions. Thread-safety: built on the log's thread, then used
    by one cleaner worker; never reads the live log."""

    def __init__(self, aborted: list[AbortedTxn], last_batches: dict[int, tuple[int, int]],
                 now_ms: int) -> None:
        self._pending = [(t.first_offset, t.last_offset, t.producer_id) for t in aborted]
        heapq.heapify(self._pending)
        self._aborted_ends = {(t.producer_id, t.last_offset) for t in aborted}
        self._open_aborted: dict[int, bool] = {}  # producer -> saw a batch of the txn
        self._open_committed: set[int] = set()
        self._last_batches = last_batches  # producer -> (last data offset, epoch)
        self._now = now_ms

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, _, producer_id = heapq.heappop(pending)
            self._open_aborted.setdefault(producer_id, False)

    def _on_data(self, h: BatchHeader) -> bool:
        """True if the batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        if h.producer_id in self._open_aborted:
            self._open_aborted[h.producer_id] = True
            return True
        self._open_committed.add(h.producer_id)
        return False

    def _on_marker(self, h: BatchHeader) -> bool:
        """True if the marker's transaction has no batch left: the marker may go."""
        self._consume_aborted_up_to(h.last_offset)
        if h.records_count == 0:
            return True  # already emptied by an earlier round
        pid = h.producer_id
        if (pid, h.base_offset) in self._aborted_ends:
            return not self._open_aborted.pop(pid, False)
        if pid in self._open_committed:
            self._open_committed.discard(pid)
            return False
        return True

    # ---- BatchPolicy ------------------------------------------------------------------------
    def include_in_offset_map(self, header: BatchHeader) -> bool:
        if header.is_control:
            self._on_marker(header)
            return False
        return not self._on_data(header)

    def check_batch(self, header: BatchHeader) -> BatchDecision:
        if header.is_control:
            empty_txn = self._on_marker(header)
            horizon_passed = header.has_delete_horizon and header.base_timestamp <= self._now
            discard = empty_txn and horizon_passed
        else:
            discard = empty_txn = self._on_data(header)
        if header.producer_id >= 0 and self._is_last_of_producer(header):
            retention = BatchRetention.RETAIN_EMPTY
        elif discard:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return BatchDecision(retention, discard, empty_txn and header.is_control)

    def _is_last_of_producer(self, h: BatchHeader) -> bool:
        last = self._last_batches.get(h.producer_id)
        if last is None:
            return False
        last_data_offset, epoch = last
        if last_data_offset != NO_OFFSET:
            return h.last_offset == last_data_offset
        return h.is_control and h.producer_epoch == epoch


class TransactionalBatchPolicyFactory:
    """The factory the broker passes to the LogCleaner. Stateless."""

    def __call__(self, log: PartitionLog, start_offset: int, end_offset: int
                 ) -> TransactionalBatchPolicy:
        aborted = log.aborted_transactions(start_offset, end_offset)
        last_batches = {e.producer_id: (e.last_data_offset, e.producer_epoch)
                        for e in log.active_producers()}
        return TransactionalBatchPolicy(aborted, last_batches, log.clock.now_ms())


TRANSACTIONAL_BATCH_POLICY = TransactionalBatchPolicyFactory()
