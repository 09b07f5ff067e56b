"""What the cleaner does with each whole batch, before looking at its records: the hook through
which producer and transaction state steer compaction (the batch half of Kafka's cleaner
RecordFilter and its CleanedTransactionMetadata).

For every round the cleaner asks a `BatchPolicyFactory` twice, on the broker's event-loop
thread, for a fresh `BatchPolicy`: one for the walk that builds the offset map over the dirty
section, one for the walk that rewrites the log. Each policy then sees every batch of its walk
once, in offset order, on the cleaner's worker thread, so it may keep state across batches
(open transactions) but must not read live broker state: take a snapshot in the factory.

The default, `KeepProducerState`, is what this broker needs before transactions exist:
control batches stay as they are, and a batch that carries a producer id is kept as an empty
batch (header only) when all its records are cleaned, so producer state can be rebuilt from
the log. With transactions, a policy will (as Kafka's does) leave aborted batches out of the
offset map, discard their records, drop markers whose transactions are fully cleaned once their
delete horizon has passed, and keep empty only the last batch of each active producer.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, NamedTuple, Protocol

from spark_log.records.batch_header import BatchHeader

if TYPE_CHECKING:
    from spark_log.storage.log.partition_log import PartitionLog


class BatchRetention(Enum):
    """Kafka's RecordFilter.BatchRetention."""

    DELETE = "delete"  # drop the batch, whatever its records
    DELETE_EMPTY = "delete_empty"  # keep the records that survive; drop the batch if none does
    RETAIN_EMPTY = "retain_empty"  # as DELETE_EMPTY, but keep a header-only batch if none does


class BatchDecision(NamedTuple):
    """The policy's answer for one batch.

    `discard_records`: remove every record of the batch (aborted data, an expired marker).
    `contains_marker_for_empty_txn`: a marker whose transaction has no data left, which gets a
    delete horizon like a tombstone does.
    """

    retention: BatchRetention
    discard_records: bool = False
    contains_marker_for_empty_txn: bool = False


class BatchPolicy(Protocol):
    def include_in_offset_map(self, header: BatchHeader) -> bool:
        """Offset-map walk: whether this batch's keys count as the latest for their key."""
        ...

    def check_batch(self, header: BatchHeader) -> BatchDecision:
        """Rewrite walk: what to do with this batch."""
        ...


class BatchPolicyFactory(Protocol):
    def __call__(self, log: PartitionLog, start_offset: int, end_offset: int) -> BatchPolicy:
        """A policy for one walk over [start_offset, end_offset) of `log`."""
        ...


DELETE_EMPTY = BatchDecision(BatchRetention.DELETE_EMPTY)
RETAIN_EMPTY = BatchDecision(BatchRetention.RETAIN_EMPTY)


class KeepProducerState:
    """The default policy. Stateless, so one instance serves every walk."""

    def include_in_offset_map(self, header: BatchHeader) -> bool:
        return not header.is_control

    def check_batch(self, header: BatchHeader) -> BatchDecision:
        return RETAIN_EMPTY if header.producer_id >= 0 else DELETE_EMPTY

    def __call__(self, log: PartitionLog, start_offset: int, end_offset: int) -> BatchPolicy:
        return self


KEEP_PRODUCER_STATE = KeepProducerState()


def is_default(policy: BatchPolicy) -> bool:
    """Whether `policy` is exactly `KeepProducerState` (not a subclass that may override it):
    the native batch walks know its decisions and walk a chunk in one call."""
    return type(policy) is KeepProducerState
