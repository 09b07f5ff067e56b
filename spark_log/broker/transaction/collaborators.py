"""What the transaction coordinator needs from the rest of the broker besides its own topic
(`coordinator.collaborators`), as protocols: fresh producer ids, and the group coordinator's
side of transactional offset commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class ProducerIdSource(Protocol):
    def next_id(self) -> int:
        """A producer id never handed out before in the cluster (KafkaError when none is
        ready: callers await `ready()` first)."""
        ...


class TransactionalOffsets(Protocol):
    """The group coordinator, as transactions see it."""

    def loaded(self) -> bool:
        """True once every `__consumer_offsets` partition has been replayed."""
        ...

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id`."""
        ...

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             partitions: Iterable[int] | None = None,
                             coordinator_epoch: int = 0) -> None:
        """Write the transaction's marker to those partitions; its pending offsets become
        committed (or are dropped). Raises KafkaError."""
        ...
