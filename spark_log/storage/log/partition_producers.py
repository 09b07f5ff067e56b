"""A partition log's producer side (the producer half of Kafka's UnifiedLog): when its producer
state loads, how an append is checked against it and applied after the write, where aborted
transactions are indexed, and the answers read_committed needs (first unstable offset,
aborted transactions of a fetch).

The state loads lazily on first use (opening many logs reads no snapshot), except after a
crash, when it is rebuilt at once so the transaction indexes of recovered segments are whole
before the recovery point moves past them.
"""

from __future__ import annotations

from typing import NamedTuple

from spark_log.clock import Clock
from spark_log.records.batch_header import BatchHeader
from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.filesystem import Buffer
from spark_log.storage.index.transaction_index import AbortedTxn
from spark_log.storage.log.local_log import LocalLog
from spark_log.storage.log.log_validator import ValidatedAppend
from spark_log.storage.log.producer_state_loader import read_marker, rebuild_producer_state
from spark_log.storage.producer_state.producer_append import ProducerAppend
from spark_log.storage.producer_state.producer_state import ProducerStateManager
from spark_log.storage.producer_state.producer_state_entry import BatchMetadata, ProducerStateEntry


class PendingAppend(NamedTuple):
    """What an accepted append will change once written: a produce request's one batch
    (`single`), or the general update of several batches or markers (`update`)."""

    single: BatchHeader | None
    update: ProducerAppend | None


class PartitionProducers:
    """Invariant: once loaded, `manager` reflects every batch below the log end offset.
    Thread-safety: none; its PartitionLog serializes every call and guards I/O errors."""

    def __init__(self, directory: str, name: str, local: LocalLog, clock: Clock,
                 snapshots: list[int] | None = None) -> None:
        self.name, self.local, self.clock = name, local, clock
        self._manager = ProducerStateManager(directory, name, local.fs, snapshots)
        self.loaded = False

    @property
    def manager(self) -> ProducerStateManager:
        if not self.loaded:
            self.load(None)
        return self._manager

    def load(self, recovered_from: int | None) -> None:
        """(Re)build from the newest usable snapshot and the log after it."""
        rebuild_producer_state(self._manager, self.local.segments.to_list(),
                               log_end=self.local.log_end_offset,
                               recovered_from=recovered_from, now_ms=self.clock.now_ms(),
                               max_idle_ms=None)
        self.loaded = True

    # ---- appends --------------------------------------------------------------------------
    def check(self, records: Buffer, valid: ValidatedAppend, origin: AppendOrigin
              ) -> BatchMetadata | PendingAppend | None:
        """Check an append (offsets assigned): the batch a client retry duplicates, what to
        apply once written, or None when no producer is involved. Raises if refused."""
        first = valid.headers[0]
        if len(valid.headers) == 1:  # a produce request
            if first.producer_id < 0:
                return None
            if not first.is_control:
                duplicate = self.manager.check_batch(first, origin)
                return duplicate if duplicate is not None else PendingAppend(first, None)
        elif not any(h.producer_id >= 0 for h in valid.headers):
            return None
        if origin is AppendOrigin.CLIENT:
            duplicate = self.manager.find_duplicate(first)
            if duplicate is not None:
                return duplicate
        markers = {}
        position = 0
        for h in valid.headers:
            if h.is_control:
                marker = read_marker(memoryview(records)[position : position + h.size])
                if marker is not None:
                    markers[h.base_offset] = marker
            position += h.size
        return PendingAppend(None, self.manager.prepare(valid.headers, origin, markers))

    def apply(self, pending: PendingAppend) -> None:
        """After the write: update the state, index the transactions it aborted."""
        if pending.single is not None:
            self._manager.apply_batch(pending.single)
            return
        assert pending.update is not None
        segment = self.local.segments.active
        for txn, lso in self._manager.commit(pending.update, self.local.log_end_offset):
            segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                txn.last_offset, lso))
            if self.local.recovery_point > txn.last_offset:  # flush.messages already synced
                segment.txn_index.flush()  # the marker: its index entry must be durable too

    @staticmethod
    def duplicate_info(duplicate: BatchMetadata, log_append_time: bool, log_start_offset: int
                       ) -> AppendInfo:
        """Kafka's answer to a retry: the offsets the batch got the first time."""
        return AppendInfo(
            first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
            max_timestamp=duplicate.timestamp, offset_of_max_timestamp=duplicate.last_offset,
            log_append_time=duplicate.timestamp if log_append_time else -1,
            log_start_offset=log_start_offset, batch_count=0, record_count=0, size_bytes=0)

    # ---- read_committed -------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        return self.manager.first_unstable_offset()

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """From the transaction index of the segment holding `fetch_offset` on."""
        segments = self.local.segments
        active = segments.active  # what a consumer keeping up reads: no look-ups
        segment = active if fetch_offset >= active.base_offset else \
            (segments.floor(fetch_offset) or segments.first)
        found: list[AbortedTxn] = []
        while segment is not None:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete or segment is active:
                break
            segment = segments.higher(segment.base_offset)
        return found

    # ---- upkeep ---------------------------------------------------------------------------
    def active(self) -> list[ProducerStateEntry]:
        return list(self.manager.producers.values())

    def remove_expired(self, max_idle_ms: int, now_ms: int) -> int:
        return self._manager.remove_expired(now_ms, max_idle_ms) if self.loaded else 0

    def snapshot(self, offset: int) -> None:
        """At a roll or a clean close: the state below `offset` (the log end offset)."""
        self.manager.take_snapshot(offset)

    def segments_deleted(self, first_remaining: int) -> None:
        self._manager.delete_snapshots_before(first_remaining)

    def truncated_fully(self, offset: int) -> None:
        self._manager.truncate_fully(offset)
        self.loaded = True
