"""One transactional id's state and the transitions between states (Kafka's TransactionState and
TransactionMetadata), as a table.

    state               may follow                                  meaning
    Empty               Empty, CompleteCommit, CompleteAbort        no transaction open
    Ongoing             Ongoing, Empty, CompleteCommit, CompleteAbort   partitions being added
    PrepareCommit       Ongoing                                     markers being written
    PrepareAbort        Ongoing, PrepareEpochFence                  markers being written
    CompleteCommit      PrepareCommit                               markers all written
    CompleteAbort       PrepareAbort                                markers all written
    Dead                Empty, CompleteCommit, CompleteAbort        id expired (tombstone)
    PrepareEpochFence   Ongoing                                     fencing before an abort

A transition never changes a metadata object in place: `transition` returns the would-be new
state, which the coordinator writes to `__transaction_state` and only then adopts, so memory
always matches the log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


class TxnState(IntEnum):
    """Kafka's state ids, as stored in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def from_display_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display_name == name), None)


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
PREPARING = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})
COMPLETE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransitionError(RuntimeError):
    """A transition the table does not allow: a coordinator bug, never a client error."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """Immutable. Invariants: `partitions` is empty unless Ongoing or preparing; `start_ms` is
    -1 when no transaction is open; `last_producer_epoch` is the epoch before the last bump
    by the same producer (-1 after a new producer took over), which lets a producer retry a
    bump whose answer it lost."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def transition(self, state: TxnState, now_ms: int, **changes: object
                   ) -> TransactionMetadata:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(f"transactional id {self.transactional_id}: "
                                         f"{self.state.display_name} -> {state.display_name}")
        return dataclasses.replace(self, state=state, last_update_ms=now_ms,
                                   **changes)  # type: ignore[arg-type]

    @property
    def epoch_exhausted(self) -> bool:
        """Kafka keeps the top epoch for fencing: at 32766 a new producer id is due."""
        return self.producer_epoch >= MAX_EPOCH - 1

    # ---- the coordinator's transitions ---------------------------------------------------
    def bump_epoch(self, now_ms: int, timeout_ms: int, epoch: int, last_epoch: int
                   ) -> TransactionMetadata:
        """InitProducerId: Empty at `epoch` (the bumped one, or the same on a retry)."""
        return self.transition(S.EMPTY, now_ms, producer_epoch=epoch,
                               last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                               partitions=frozenset(), start_ms=-1)

    def rotate_producer_id(self, now_ms: int, timeout_ms: int, new_producer_id: int,
                           keep_last_epoch: bool) -> TransactionMetadata:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        return self.transition(
            S.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
            last_producer_id=self.producer_id,
            last_producer_epoch=self.producer_epoch if keep_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)

    def add_partitions(self, now_ms: int, added: frozenset[TopicPartition]
                       ) -> TransactionMetadata:
        start = now_ms if self.state in COMPLETE else self.start_ms
        return self.transition(S.ONGOING, now_ms, partitions=self.partitions | added,
                               start_ms=start)

    def prepare_end(self, now_ms: int, commit: bool, epoch: int) -> TransactionMetadata:
        """EndTxn or a timeout: PrepareCommit/PrepareAbort (at `epoch`, bumped for fencing)."""
        last = self.last_producer_epoch if epoch == self.producer_epoch else NO_PRODUCER_EPOCH
        return self.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms,
                               producer_epoch=epoch, last_producer_epoch=last)

    def complete_end(self, now_ms: int) -> TransactionMetadata:
        """All markers written: CompleteCommit/CompleteAbort, no partitions."""
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self.transition(state, now_ms, partitions=frozenset())

    def is_timed_out(self, now_ms: int) -> bool:
        return self.state == S.ONGOING and now_ms - self.start_ms > self.timeout_ms
