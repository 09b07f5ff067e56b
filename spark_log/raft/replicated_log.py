"""The replica's view of its log: batches in offset order after an optional snapshot, and the
epoch history that tells where two logs diverge (Kafka's ReplicatedLog and its leader-epoch
cache).

Kept in memory — the metadata log is small, and snapshots cut its prefix — while the driver
keeps the durable copy the actions describe.
"""

from __future__ import annotations

import bisect
from enum import Enum

from .messages import Batch, OffsetAndEpoch


class Validity(Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


class ReplicatedLog:
    """Invariants: batches are contiguous from `start_offset` and their epochs never decrease;
    `_bases` holds each batch's base offset; `_epochs` / `_epoch_starts` list each epoch present
    and its first offset; with a snapshot, the log starts at its end offset. Not thread-safe."""

    def __init__(self, snapshot_id: OffsetAndEpoch | None = None,
                 batches: list[Batch] | None = None) -> None:
        self.snapshot_id = snapshot_id
        self.start_offset = snapshot_id.offset if snapshot_id else 0
        self.batches: list[Batch] = []
        self._bases: list[int] = []
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        for batch in batches or ():
            self.append(batch)

    # ---- positions ------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.start_offset

    @property
    def last_epoch(self) -> int:
        if self.batches:
            return self.batches[-1].epoch
        return self.snapshot_id.epoch if self.snapshot_id else 0

    def end(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.end_offset, self.last_epoch)

    def epoch_at(self, offset: int) -> int:
        """The epoch of the record before `offset` (what a fetch from `offset` names)."""
        i = bisect.bisect_right(self._epoch_starts, offset - 1)
        if i == 0:
            return self.snapshot_id.epoch if self.snapshot_id else 0
        return self._epochs[i - 1]

    # ---- changes --------------------------------------------------------------------------
    def append(self, batch: Batch) -> None:
        if batch.base_offset != self.end_offset or batch.epoch < self.last_epoch or \
                not batch.records:
            raise ValueError(f"batch {batch.base_offset} (epoch {batch.epoch}) does not follow "
                             f"the log end {self.end()}")
        if not self._epochs or self._epochs[-1] != batch.epoch:
            self._epochs.append(batch.epoch)
            self._epoch_starts.append(batch.base_offset)
        self.batches.append(batch)
        self._bases.append(batch.base_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch ending after `offset`; returns the new end offset (the largest
        batch boundary <= offset, never below the start)."""
        keep = bisect.bisect_right(self._bases, offset - 1)
        if keep and self.batches[keep - 1].next_offset > offset:
            keep -= 1  # `offset` falls inside that batch: it goes too
        del self.batches[keep:]
        del self._bases[keep:]
        end = self.end_offset
        while self._epoch_starts and self._epoch_starts[-1] >= end:
            self._epochs.pop()
            self._epoch_starts.pop()
        return end

    def reset_to_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Everything is replaced by a snapshot (fetched from the leader)."""
        self.snapshot_id = snapshot_id
        self.start_offset = snapshot_id.offset
        self.batches, self._bases, self._epochs, self._epoch_starts = [], [], [], []

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """A snapshot of the records below its end offset was taken: drop them."""
        drop = bisect.bisect_right(self._bases, snapshot_id.offset - 1)
        if drop and self.batches[drop - 1].next_offset != snapshot_id.offset:
            raise ValueError(f"snapshot {snapshot_id} does not end on a batch boundary")
        kept = self.batches[drop:]
        self.reset_to_snapshot(snapshot_id)
        for batch in kept:
            self.append(batch)

    # ---- reading and comparing ------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> tuple[Batch, ...]:
        """Whole batches from `offset` (a batch boundary), at least one if any."""
        i = bisect.bisect_left(self._bases, offset)
        out, size = [], 0
        for batch in self.batches[i:]:
            if out and size + batch.size() > max_bytes:
                break
            out.append(batch)
            size += batch.size()
        return tuple(out)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and the offset where it ends (Kafka's
        endOffsetForEpoch); the snapshot's end when the log holds no such epoch."""
        i = bisect.bisect_right(self._epochs, epoch)
        if i == 0:
            snapshot = self.snapshot_id or OffsetAndEpoch(0, 0)
            return OffsetAndEpoch(self.start_offset, snapshot.epoch)
        end = self._epoch_starts[i] if i < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(end, self._epochs[i - 1])

    def validate(self, offset: int, epoch: int) -> tuple[Validity, OffsetAndEpoch]:
        """Whether a fetcher whose log ends at (offset, epoch) agrees with this log (Kafka's
        validateOffsetAndEpoch): valid, diverging (truncate to the answer), or behind the
        snapshot (fetch it)."""
        if offset == 0 and self.start_offset == 0:
            return Validity.VALID, OffsetAndEpoch(0, 0)
        snapshot = self.snapshot_id
        if snapshot is not None and (offset < self.start_offset or epoch < snapshot.epoch or
                                     (offset == self.start_offset and epoch != snapshot.epoch)):
            return Validity.SNAPSHOT, snapshot
        found = self.end_offset_for_epoch(epoch)
        if found.epoch != epoch or found.offset < offset:
            return Validity.DIVERGING, found
        return Validity.VALID, OffsetAndEpoch(offset, epoch)
