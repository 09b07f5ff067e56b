"""What a partition remembers about one producer (Kafka's ProducerStateEntry and
BatchMetadata): its epoch, the sequence and offset ranges of its last five batches (to answer
retries of any in-flight request), the coordinator epoch of its last transaction marker and the
first offset of its open transaction.

Sequences are per partition and wrap from 2^31-1 to 0, as Kafka's do.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from spark_log.records.batch_header import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5  # librdkafka and the Java client keep at most 5 requests in flight
SEQUENCE_MODULUS = 0x80000000
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1


class BatchMetadata(NamedTuple):
    """One appended batch of a producer: last sequence, last offset, offsets it spans - 1,
    max timestamp. Immutable."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        if self.last_seq == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.last_seq - self.offset_delta) % SEQUENCE_MODULUS

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id in one partition.

    Invariants: `batches` holds at most five batches of the current epoch, oldest first, with
    consecutive sequences; `current_txn_first_offset` is NO_OFFSET unless a transaction of this
    producer is open in the partition. Not thread-safe (owned by a ProducerStateManager).
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, deque(self.batches),
                                  self.coordinator_epoch, self.last_timestamp,
                                  self.current_txn_first_offset)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_epoch(self, epoch: int) -> bool:
        """Move to `epoch` if it differs, forgetting the old epoch's batches."""
        if self.producer_epoch == epoch:
            return False
        self.batches.clear()
        self.producer_epoch = epoch
        return True

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        while len(self.batches) > NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.last_timestamp = timestamp

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch `header` repeats (same epoch, same sequence range), if any."""
        if header.producer_epoch != self.producer_epoch or not self.batches:
            return None
        first = header.base_sequence
        if first == (self.batches[-1].last_seq + 1) % SEQUENCE_MODULUS:
            return None  # the next batch in sequence: the usual case
        last = header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None
