"""The leader epoch cache of one partition: which leader epoch began at which offset.

Kafka's LeaderEpochFileCache, persisted in the partition's `leader-epoch-checkpoint`
(`epoch start_offset` lines). Appends stamped with a new epoch add an entry; truncation and log
start offset moves trim it. Replication (OffsetForLeaderEpoch) uses `end_offset_for`; ListOffsets
uses `epoch_for_offset` and `latest_epoch`.

A new entry is written when the log flushes past its start offset, not when it is assigned.
Kafka fsyncs the file on every assignment so that it never misses an entry of a batch below the
recovery point: recovery re-reads only the batches above it, and rebuilds their entries. Syncing
before the recovery point moves keeps that guarantee and takes the file writes off the append
path and off leadership changes (a broker taking the leadership of 10,000 partitions at a new
epoch, as every single-node restart does, would otherwise write and fsync 10,000 files before
serving). An entry at the log end (a leadership taken, before its first append) is not written
by a flush to that offset; lost in a crash, it is no loss: the next leadership assigns its own
epoch at the same offset, which replaces it (Kafka's assign drops the entries starting at or
after a new entry's start offset).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import Any, NamedTuple

from spark_log.records.batch_header import BatchHeader
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.checkpoint import CheckpointFile, CorruptCheckpointError
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries ordered by epoch, with strictly increasing epochs and start offsets (invariant).

    Every entry starting below the offset last given to `sync_below` is durably in the file
    (invariant; the log calls it before its recovery point moves). Assignments wait for that;
    trims are written at once, since they are rare. Not thread-safe: owned by one log.
    """

    def __init__(self, path: str, fs: FileSystem = DEFAULT_FS) -> None:
        self._file = CheckpointFile(path, fs)
        # Why the file did not parse, if it did not: its owner rebuilds it from the log.
        self.problem: str | None = None
        try:
            entries = self._file.read_lines(lambda f: EpochEntry(int(f[0]), int(f[1])), 2)
            _check_increasing(path, entries)
        except CorruptCheckpointError as e:
            entries = []
            self.problem = str(e)
        self._entries: list[EpochEntry] = entries
        # The lowest start offset of an entry not yet durably in the file (None: all are).
        self._unsynced_from: int | None = None

    @property
    def damaged(self) -> bool:
        return self.problem is not None

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` if that is news; True if it changed.
        The file gets it from `sync_below` (or any write that comes first).

        A new entry removes any entries that conflict with it (epoch or start offset not below
        it), as Kafka does when a new leader's epoch supersedes divergent history.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return False
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        removed = self._entries[len(kept):]
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning("New epoch entry %s caused truncation of conflicting entries %s",
                        (epoch, start_offset), removed)
        self._entries = [*kept, EpochEntry(epoch, start_offset)]
        owed = self._unsynced_from
        self._unsynced_from = start_offset if owed is None else min(owed, start_offset)
        return True

    def sync_below(self, offset: int) -> None:
        """Make the file durable if an entry starting below `offset` is not yet: the log's
        batches below `offset` are about to be fsynced, and recovery will not read them again."""
        owed = self._unsynced_from
        if owed is not None and owed < offset:
            self._write()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (None before the first entry)."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch, as Kafka computes it."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [e for e in self._entries if e.epoch <= epoch]
        return (floor[-1].epoch if floor else epoch), higher.start_offset

    def truncate_from_end(self, end_offset: int, *, sync: bool = True) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there).
        `sync=False` when the log's recovery does it, as Kafka's truncateFromEndAsyncFlush: each
        start after a crash truncates again, so a write lost with the page cache costs nothing
        (and a torn file is rebuilt from the log)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write(sync=sync)

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below a new log start offset; the last of them is moved up to
        start there, so the epoch of the first remaining offset stays known."""
        below = [e for e in self._entries if e.start_offset <= start_offset]
        if not below or (len(below) == 1 and below[0].start_offset == start_offset):
            return
        rest = self._entries[len(below):]
        self._entries = [EpochEntry(below[-1].epoch, start_offset), *rest]
        self._write()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._write()

    def rebuild(self, epochs: Iterable[tuple[int, int]]) -> None:
        """Replace every entry by those of (epoch, base offset) of the log's batches, in offset
        order, and write the file."""
        self._entries = []
        for epoch, offset in epochs:
            if self._begins(epoch):
                self._entries.append(EpochEntry(epoch, offset))
        self._write()
        self.problem = None

    def rebuild_from(self, segments: Iterable[Any], log_start_offset: int, name: str) -> None:
        """The checkpoint did not parse: learn the epochs again from every batch header of the
        log's `segments` (up to any damage, which reads will find)."""
        log.warning("Ignoring damaged leader epoch checkpoint (%s); rebuilding it from the log",
                    self.problem)

        def epochs() -> Iterator[tuple[int, int]]:
            for segment in segments:
                try:
                    for _, header in segment.log.batches():
                        yield header.partition_leader_epoch, header.base_offset
                except CorruptRecordError:
                    return
        self.rebuild(epochs())
        self.truncate_from_start(log_start_offset)
        log.info("%s: rebuilt the leader epoch checkpoint from the log: %s", name, self.entries)

    def recover_batch(self, header: BatchHeader) -> None:
        """Recovery walked past a batch: an epoch newer than the latest begins there."""
        if self._begins(header.partition_leader_epoch):
            self.assign(header.partition_leader_epoch, header.base_offset)

    def _begins(self, epoch: int) -> bool:
        """Whether a batch stamped `epoch`, read in offset order, begins a new epoch."""
        latest = self.latest_epoch()
        return epoch >= 0 and (latest is None or epoch > latest)

    def _lines(self) -> list[str]:
        return [f"{e.epoch} {e.start_offset}" for e in self._entries]

    def _write(self, *, sync: bool = True) -> None:
        self._file.write_lines(self._lines(), sync=sync)
        if sync:
            self._unsynced_from = None


def _check_increasing(path: str, entries: list[EpochEntry]) -> None:
    for before, after in pairwise(entries):
        if not (before.epoch < after.epoch and before.start_offset < after.start_offset):
            raise CorruptCheckpointError(f"{path}: entries {tuple(before)} and {tuple(after)} "
                                         f"do not both increase")
    if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
        raise CorruptCheckpointError(f"{path}: a negative epoch or start offset")
