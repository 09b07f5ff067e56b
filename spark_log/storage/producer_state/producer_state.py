"""The producer state of one partition (Kafka's ProducerStateManager): every producer id that
wrote to it, the transactions open in it, and the snapshots that make both survive restarts.

What it answers:
* is this client batch a retry of one already written (`find_duplicate`), and may it be
  written at all (`prepare`: epochs, sequences, transaction rules — see `producer_append`);
* the first unstable offset: the first offset of the earliest open transaction, below which
  read_committed consumers may read (the LSO is the lesser of it and the high watermark);
* for a transaction just aborted, the LSO right after it (the transaction index stores it).

State changes only by `commit`, with what `prepare` computed, after the batches are written;
`map_end_offset` is the offset after the last batch applied. Snapshots (`producer_snapshot`)
are taken at segment roll and clean shutdown; recovery (`producer_state_loader`) loads the
latest one and replays the log after it. Idle producers expire after producer.id.expiration.ms
(measured, as in Kafka, from the max timestamp of their last batch), unless a transaction of
theirs is open.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from spark_log.records.batch_header import BatchHeader
from spark_log.records.control_record import EndTransactionMarker
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.producer_state.producer_append import (
    CompletedTxn,
    ProducerAppend,
    append_data_batch,
    append_end_marker,
    apply_data_batch,
    check_data_batch,
)
from spark_log.storage.producer_state.producer_snapshot import CorruptSnapshotError, list_snapshots
from spark_log.storage.producer_state.producer_snapshot import delete as delete_snapshot
from spark_log.storage.producer_state.producer_snapshot import read as read_snapshot
from spark_log.storage.producer_state.producer_snapshot import write as write_snapshot
from spark_log.storage.producer_state.producer_state_entry import (
    NO_OFFSET,
    BatchMetadata,
    ProducerStateEntry,
)

log = logging.getLogger(__name__)


class ProducerStateManager:
    """Invariants: `_ongoing` maps the first offset of every open transaction to its producer
    id, and a producer's entry has `current_txn_first_offset` set exactly when it is in
    `_ongoing`; every snapshot file at offset N describes the log below N.

    Thread-safety: none; its PartitionLog serializes every call.
    """

    def __init__(self, directory: str, name: str, fs: FileSystem,
                 snapshots: list[int] | None = None) -> None:
        """`snapshots`: the offsets of the directory's snapshot files, when the caller has just
        listed it (else it is listed on first use)."""
        self.dir, self.name, self.fs = directory, name, fs
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}
        self.map_end_offset = 0
        self._listed: list[int] | None = snapshots

    @property
    def _snapshots(self) -> list[int]:
        # Listed lazily: a clean start of many partitions need not list each directory twice.
        if self._listed is None:
            self._listed = list_snapshots(self.dir)
        return self._listed

    @_snapshots.setter
    def _snapshots(self, offsets: list[int]) -> None:
        self._listed = offsets

    # ---- appends --------------------------------------------------------------------------
    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def check_batch(self, h: BatchHeader, origin: AppendOrigin) -> BatchMetadata | None:
        """The shortcut for a produce request's one data batch (offsets assigned): the batch
        it duplicates (CLIENT), or None if it may be written; raises if it may not. Nothing
        changes until `apply_batch`."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            check_data_batch(ProducerStateEntry(h.producer_id), h, origin, True, self.name)
            return None
        if origin is AppendOrigin.CLIENT:
            duplicate = entry.find_duplicate(h)
            if duplicate is not None:
                return duplicate
        check_data_batch(entry, h, origin, False, self.name)
        return None

    def apply_batch(self, h: BatchHeader) -> None:
        """Apply a batch `check_batch` accepted, once it is written."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
        if apply_data_batch(entry, h):
            self._ongoing[h.base_offset] = h.producer_id
        self.map_end_offset = h.next_offset

    def prepare(self, headers: Sequence[BatchHeader], origin: AppendOrigin,
                markers: dict[int, EndTransactionMarker]) -> ProducerAppend:
        """Validate batches (offsets assigned) of producers; `markers` gives the marker of
        each control batch by its base offset. Raises the error of the first bad batch."""
        out = ProducerAppend()
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            entry = out.entries.get(pid)
            known = self.producers.get(pid)
            if entry is None:
                entry = known.copy() if known is not None else ProducerStateEntry(pid)
                out.entries[pid] = entry
            if h.is_control:
                marker = markers.get(h.base_offset)
                if marker is not None:
                    append_end_marker(entry, h, marker, origin, out, self.name)
            else:
                append_data_batch(entry, h, origin, known is None, out, self.name)
        return out

    def commit(self, append: ProducerAppend, end_offset: int) -> list[tuple[CompletedTxn, int]]:
        """Apply a prepared append whose batches end before `end_offset`; returns each
        aborted transaction with the LSO just after it (for the transaction index)."""
        self.map_end_offset = max(self.map_end_offset, end_offset)
        for pid, first in append.started:
            self._ongoing[first] = pid
        aborted = []
        for txn in append.completed:
            if txn.is_aborted:
                aborted.append((txn, self.last_stable_offset_after(txn)))
            self._ongoing.pop(txn.first_offset, None)
        self.producers.update(append.entries)
        return aborted

    # ---- stability ------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction, or None."""
        return min(self._ongoing) if self._ongoing else None

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once `txn` is complete: the earliest other open transaction's first
        offset, else the offset after the marker."""
        others = [first for first, pid in self._ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of each open transaction."""
        return dict(self._ongoing)

    # ---- expiry ---------------------------------------------------------------------------
    def remove_expired(self, now_ms: int, max_idle_ms: int) -> int:
        """Forget producers idle for `max_idle_ms` without an open transaction; how many."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.current_txn_first_offset == NO_OFFSET
                  and now_ms - e.last_timestamp >= max_idle_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    # ---- snapshots ------------------------------------------------------------------------
    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> None:
        """Write the state as a snapshot at `offset` (default `map_end_offset`), which must
        be the log end offset: every batch below it is applied."""
        if offset is None:
            offset = self.map_end_offset
        self.map_end_offset = offset
        if self._snapshots and self._snapshots[-1] == offset:
            return
        write_snapshot(self.dir, offset, self.producers.values(), self.fs, sync=sync)
        self._snapshots = [o for o in self._snapshots if o < offset] + [offset]

    def load_latest_snapshot(self, at_most: int, log_end: int, now_ms: int,
                             max_idle_ms: int | None) -> int:
        """Load the newest readable snapshot at or below `at_most`; returns its offset, or -1
        when there is none (state empty). Damaged snapshots are deleted, and so is every one
        above `log_end`: it describes batches the log no longer holds. Those between the two
        stay, since the log still holds the prefix they describe."""
        for offset in [o for o in self._snapshots if o > log_end]:
            self._delete_snapshot(offset)
        for offset in reversed([o for o in self._snapshots if o <= at_most]):
            try:
                entries = read_snapshot(self.dir, offset)
            except (OSError, CorruptSnapshotError) as e:
                log.warning("%s: deleting unreadable producer snapshot at %d (%s); the state is "
                            "rebuilt from an older one or the log", self.name, offset, e)
                self._delete_snapshot(offset)
                continue
            self._reset(offset)
            for entry in entries:
                if max_idle_ms is None or entry.current_txn_first_offset != NO_OFFSET or \
                        now_ms - entry.last_timestamp < max_idle_ms:
                    self._load_entry(entry)
            return offset
        self._reset(0)
        return -1

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset != NO_OFFSET:
            self._ongoing[entry.current_txn_first_offset] = entry.producer_id

    def _reset(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self.map_end_offset = offset

    def truncate_fully(self, offset: int) -> None:
        """Forget everything (the log restarts empty at `offset`)."""
        for snapshot in list(self._snapshots):
            self._delete_snapshot(snapshot)
        self._reset(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        """Segments below `offset` are gone: so are their snapshots."""
        for snapshot in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(snapshot)

    def _delete_snapshot(self, offset: int) -> None:
        delete_snapshot(self.dir, offset, self.fs)
        self._snapshots = [o for o in self._snapshots if o != offset]
