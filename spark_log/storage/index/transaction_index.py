"""The transaction index of a segment (`<base offset>.txnindex`, Kafka's TransactionIndex): the
aborted transactions whose ABORT marker lies in the segment, so read_committed fetches can tell
consumers which records to drop without reading any batch.

Kafka's format: 34-byte big-endian entries (version int16 = 0, producer id int64, first offset
int64, last offset int64, last stable offset int64). `last offset` is the marker's offset;
`last stable offset` is the LSO just after the abort, which lets a search stop early: once an
entry's LSO is past the fetch's upper bound, no later entry can overlap the fetch. The file is
created with the first entry; a segment without aborted transactions has none.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import NamedTuple

from spark_log.storage.filesystem import FileSystem

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Invariants: entries are in the order their markers were written, so last offsets
    increase; the file holds exactly `entries` (a torn tail is dropped on load). Entries are
    cached in memory after the first use. Not thread-safe (its Segment's owner serializes).
    """

    def __init__(self, path: str, fs: FileSystem) -> None:
        self.path = path
        self.fs = fs
        self._entries: list[AbortedTxn] | None = None
        self._fd: int | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % _ENTRY.size
        if whole != len(data):
            log.warning("Dropping a torn entry at the end of %s", self.path)
        entries = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
            if version != _VERSION:
                log.warning("%s: entry of unknown version %d; ignoring the rest", self.path,
                            version)
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        return entries

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} "
                             f"does not follow the one ending at {entries[-1].last_offset}")
        if self._fd is None:
            self._fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT)
        position = len(entries) * _ENTRY.size
        self.fs.write_fully(self._fd, [_ENTRY.pack(_VERSION, *txn)], position)
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search
        is complete (no later segment can hold more)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def reset(self) -> None:
        """Forget every entry, whatever the file holds (recovery rebuilds them)."""
        self._entries = []
        if self._fd is None and not os.path.exists(self.path):
            return
        fd = self._fd if self._fd is not None else self.fs.open(self.path, os.O_WRONLY)
        try:
            self.fs.truncate(fd, 0)
        finally:
            if fd != self._fd:
                self.fs.close(fd)

    def problem(self, base_offset: int, limit_offset: int | None) -> str | None:
        """Why the file cannot be trusted, read afresh: a torn entry, an unknown version,
        entries out of order or outside the segment [base_offset, limit_offset). None when it
        is sound or absent."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % _ENTRY.size:
            return f"{self.path}: size {len(data)} is not a multiple of {_ENTRY.size}"
        previous = base_offset - 1
        for n, (version, _, first, last, lso) in enumerate(_ENTRY.iter_unpack(data)):
            if version != _VERSION:
                return f"{self.path}: entry {n} has unknown version {version}"
            if not first <= last or last <= previous or lso < 0 or \
                    (limit_offset is not None and last >= limit_offset):
                return (f"{self.path}: entry {n} (first offset {first}, last offset {last}) is "
                        f"out of order or outside the segment")
            previous = last
        return None

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after `offset`."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        if not os.path.exists(self.path):
            return
        fd = self._fd if self._fd is not None else self.fs.open(self.path, os.O_WRONLY)
        try:
            self.fs.truncate(fd, len(keep) * _ENTRY.size)
        finally:
            if fd != self._fd:
                self.fs.close(fd)

    def flush(self) -> None:
        if self._fd is not None:
            self.fs.fsync(self._fd)

    def close(self, *, sync: bool = False) -> None:
        if self._fd is not None:
            if sync:
                self.fs.fsync(self._fd)
            self.fs.close(self._fd)
            self._fd = None

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.fs.close(self._fd)
            self._fd = None

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            self.fs.rename(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        self.release()
        with contextlib.suppress(FileNotFoundError):
            self.fs.remove(self.path)
