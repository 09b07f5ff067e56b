"""Checking the batches of one append against the producers' state (Kafka's ProducerAppendInfo).

Works on batch headers only (plus the marker type of control batches): no per-record work.
Kafka's rules, by origin:

* every origin but REPLICATION: an epoch older than the producer's is INVALID_PRODUCER_EPOCH;
* CLIENT only, the sequence: a new epoch must start at sequence 0 (unless the producer is
  unknown here), the same epoch must continue at last sequence + 1 (wrapping at 2^31-1 to 0).
  A producer the partition does not know (never seen, expired, or its data deleted) may start
  at any sequence, as Kafka allows since KIP-360; UNKNOWN_PRODUCER_ID is never answered;
* a non-transactional batch while the producer's transaction is open is INVALID_TXN_STATE;
* a transaction marker from an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED.

Nothing is changed until the caller commits the result (`ProducerStateManager.commit`), after
the batches are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from spark_log.records.batch_header import NO_PRODUCER_EPOCH, BatchHeader
from spark_log.records.control_record import ControlRecordType, EndTransactionMarker
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from spark_log.storage.producer_state.producer_state_entry import (
    NO_OFFSET,
    SEQUENCE_MODULUS,
    ProducerStateEntry,
)


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at `last_offset`; `first_offset` is its first batch."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerAppend:
    """The state changes of one append: updated entries, transactions started (producer id,
    first offset) and completed. Applied by `ProducerStateManager.commit`."""

    entries: dict[int, ProducerStateEntry] = field(default_factory=dict)
    started: list[tuple[int, int]] = field(default_factory=list)
    completed: list[CompletedTxn] = field(default_factory=list)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == SEQUENCE_MODULUS - 1)


def check_data_batch(entry: ProducerStateEntry, h: BatchHeader, origin: AppendOrigin,
                     was_unknown: bool, tp: str) -> None:
    """Validate the data batch `h` (offsets assigned) against `entry`, changing nothing."""
    _check_epoch(entry, h.producer_epoch, h.base_offset, origin, tp)
    if origin is AppendOrigin.CLIENT:
        _check_sequence(entry, h, was_unknown, tp)
    if entry.current_txn_first_offset != NO_OFFSET and not h.is_transactional:
        raise InvalidTxnStateError(f"Expected transactional write from producer "
                                   f"{h.producer_id} at offset {h.base_offset} in {tp}")


def apply_data_batch(entry: ProducerStateEntry, h: BatchHeader) -> bool:
    """Apply a checked data batch to `entry`; True if it opened a transaction."""
    entry.add_batch(h.producer_epoch, h.last_sequence, h.last_offset, h.last_offset_delta,
                    h.max_timestamp)
    if entry.current_txn_first_offset == NO_OFFSET and h.is_transactional:
        entry.current_txn_first_offset = h.base_offset
        return True
    return False


def append_data_batch(entry: ProducerStateEntry, h: BatchHeader, origin: AppendOrigin,
                      was_unknown: bool, out: ProducerAppend, tp: str) -> None:
    """Validate the data batch `h` (offsets assigned) and apply it to `entry` (a copy)."""
    check_data_batch(entry, h, origin, was_unknown, tp)
    if apply_data_batch(entry, h):
        out.started.append((h.producer_id, h.base_offset))


def append_end_marker(entry: ProducerStateEntry, h: BatchHeader, marker: EndTransactionMarker,
                      origin: AppendOrigin, out: ProducerAppend, tp: str) -> None:
    """Validate the COMMIT/ABORT marker batch `h` and apply it to `entry` (a copy)."""
    _check_epoch(entry, h.producer_epoch, h.base_offset, origin, tp)
    if marker.coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"Invalid coordinator epoch for producer {h.producer_id} at offset "
            f"{h.base_offset} in {tp}: {marker.coordinator_epoch} (zombie), "
            f"{entry.coordinator_epoch} (current)")
    if entry.current_txn_first_offset != NO_OFFSET:
        out.completed.append(CompletedTxn(h.producer_id, entry.current_txn_first_offset,
                                          h.base_offset,
                                          marker.type == ControlRecordType.ABORT))
    entry.maybe_update_epoch(h.producer_epoch)
    entry.coordinator_epoch = marker.coordinator_epoch
    entry.last_timestamp = h.max_timestamp
    entry.current_txn_first_offset = NO_OFFSET


def _check_epoch(entry: ProducerStateEntry, epoch: int, offset: int, origin: AppendOrigin,
                 tp: str) -> None:
    if epoch < entry.producer_epoch and origin is not AppendOrigin.REPLICATION:
        raise InvalidProducerEpochError(
            f"Epoch of producer {entry.producer_id} at offset {offset} in {tp} is {epoch}, "
            f"which is smaller than the last seen epoch {entry.producer_epoch}")


def _check_sequence(entry: ProducerStateEntry, h: BatchHeader, was_unknown: bool,
                    tp: str) -> None:
    first = h.base_sequence
    if h.producer_epoch != entry.producer_epoch:
        if first != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for new epoch of producer {h.producer_id} at offset "
                f"{h.base_offset} in {tp}: {h.producer_epoch} (request epoch), {first} (seq. "
                f"number), {entry.producer_epoch} (current producer epoch)")
    elif not (was_unknown or in_sequence(entry.last_seq, first)):
        raise OutOfOrderSequenceError(
            f"Out of order sequence number for producer {h.producer_id} at offset "
            f"{h.base_offset} in {tp}: {first} (incoming seq. number), {entry.last_seq} "
            f"(current end sequence number)")
