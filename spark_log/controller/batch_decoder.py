"""Committed metadata batches decoded once for all the readers in one process.

A combined node's controller and broker both replay every committed batch, and the quorum hands
them the same batch objects one after the other. Decoding took each of them a third of a start
on a long metadata log; with a shared decoder the second reader takes the first one's records.
"""

from __future__ import annotations

from collections.abc import Callable

from spark_log.metadata import MetadataRecord
from spark_log.raft.messages import Batch

from .metadata_loader import decode_batch

__all__ = ["BatchDecoder"]


class BatchDecoder:
    """Decodes committed batches for `readers` readers of the same batch objects.

    Invariants: an entry holds the records of exactly the batch object it names (it keeps that
    object, so its id is not reused, and is matched by identity), and is dropped once the last
    reader took it; at most `max_kept` records are kept, the oldest entries dropped first (a
    reader that comes after that decodes again, keeping nothing: only a batch past every batch
    kept so far is kept). Every reader gets its own list. Not thread-safe.
    """

    def __init__(self, readers: int, *, max_kept: int = 200_000,
                 decode: Callable[[Batch], list[MetadataRecord]] = decode_batch) -> None:
        if readers < 1:
            raise ValueError(f"a decoder needs a reader, not {readers}")
        self.readers = readers
        self.max_kept = max_kept
        self._decode = decode
        # id(batch) -> (the batch, its records, how many readers have yet to take them)
        self._kept: dict[int, tuple[Batch, list[MetadataRecord], int]] = {}
        self._kept_records = 0
        self._frontier = -1  # the highest base offset kept: below it, a late reader asks

    def __call__(self, batch: Batch) -> list[MetadataRecord]:
        entry = self._kept.get(id(batch))
        if entry is not None and entry[0] is batch:
            records, left = entry[1], entry[2] - 1
            if left:
                self._kept[id(batch)] = (batch, records, left)
            else:
                self._drop(id(batch))
            return list(records)
        records = self._decode(batch)  # MetadataLoadError: nothing kept, the next one fails too
        if self.readers > 1 and batch.base_offset > self._frontier:
            self._frontier = batch.base_offset
            self._kept[id(batch)] = (batch, records, self.readers - 1)
            self._kept_records += len(records)
            while self._kept_records > self.max_kept and self._kept:
                self._drop(next(iter(self._kept)))
        return list(records)

    @property
    def kept(self) -> int:
        """How many batches are kept for a reader still to come."""
        return len(self._kept)

    def _drop(self, key: int) -> None:
        self._kept_records -= len(self._kept.pop(key)[1])
