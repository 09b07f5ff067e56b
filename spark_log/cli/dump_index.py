"""`dump-log` for the files beside a segment: `.index` (offset -> position), `.timeindex`
(timestamp -> offset), `.snapshot` (producer state) and `.txnindex` (aborted transactions).

Index entries print as Kafka prints them; a preallocated index of an active segment ends at
its first zero entry. `--verify-index-only` checks each entry against the segment's `.log`
instead of printing it: an offset index entry must point at the start of a batch whose last
offset it names, a time index entry must name a batch whose max timestamp it holds, and both
must increase. `--index-sanity-check` checks only that entries increase and stay at or above
the base offset. The same checks serve `dump-log --verify` (`verify_data_dir`): the readers
take the file's bytes, and `OffsetIndexCheck` / `TimeIndexCheck` are fed a segment's batches
as its walk reads them.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

from spark_log.records import BatchHeader, CorruptRecordError, iter_headers
from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.index import transaction_index
from spark_log.storage.index.offset_index import OffsetIndex
from spark_log.storage.index.time_index import TimeIndex
from spark_log.storage.index.transaction_index import AbortedTxn, TransactionIndex
from spark_log.storage.producer_state.producer_snapshot import CorruptSnapshotError, decode

from .errors import CliError
from .output import print_json

Dumper = Callable[[Path, argparse.Namespace], bool]


def _base_offset(path: Path) -> int:
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else 0


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def _entries(data: bytes, size: int, unpack: Any) -> tuple[list[tuple[int, int]], list[str]]:
    """Raw entries up to the first all-zero one after the first (preallocated space), and the
    problem of a file that does not hold whole entries."""
    torn = len(data) % size
    problems = [f"{torn} byte(s) at the end are not a whole {size}-byte entry"] if torn else []
    entries = []
    for slot in range(len(data) // size):
        entry = unpack(data, slot * size)
        if slot > 0 and not any(entry):
            break
        if slot == 0 and not any(entry) and not any(data[size:2 * size]):
            break
        entries.append(entry)
    return entries, problems


class IndexRead(NamedTuple):
    """An index file's entries, what is wrong with them on their own, and whether they are in
    order (only then can they be matched against the log)."""

    entries: list[dict[str, Any]]
    problems: list[str]
    ordered: bool


def offset_index_entries(data: bytes, base: int) -> IndexRead:
    """The entries of a `.index` file's bytes (relative offset, position)."""
    raw, problems = _entries(data, OffsetIndex.ENTRY.size, OffsetIndex.ENTRY.unpack_from)
    entries = [{"offset": base + rel, "position": pos} for rel, pos in raw]
    order = _increasing(entries, "offset") + _increasing(entries, "position")
    return IndexRead(entries, problems + order + _below_base(entries, base), not order)


def time_index_entries(data: bytes, base: int) -> IndexRead:
    """The entries of a `.timeindex` file's bytes (timestamp, relative offset)."""
    raw, problems = _entries(data, TimeIndex.ENTRY.size, TimeIndex.ENTRY.unpack_from)
    entries = [{"timestamp": ts, "offset": base + rel} for ts, rel in raw]
    order = _increasing(entries, "timestamp") + [
        f"Out of order offset: {a['offset']} then {b['offset']}"
        for a, b in pairwise(entries) if b["offset"] < a["offset"]]
    return IndexRead(entries, problems + order + _below_base(entries, base), not order)


def _below_base(entries: list[dict[str, Any]], base: int) -> list[str]:
    return [f"Index offset: {e['offset']} is below the base offset {base}"
            for e in entries[:1] if e["offset"] < base]


class _IndexCheck:
    """Index entries checked against the batches of their `.log`, fed in file order.

    Invariant: entries before `_next` have been matched or reported. The entries must be in
    order (check that first): matching walks them once, beside the batches."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self._entries, self._next = entries, 0
        self.problems: list[str] = []

    def feed(self, position: int, header: BatchHeader) -> None:
        raise NotImplementedError

    def finish(self) -> list[str]:
        """The problems, once every batch was fed (entries past the last batch among them)."""
        self.problems += [self._unmatched(e) for e in self._entries[self._next:]]
        self._next = len(self._entries)
        return self.problems

    def _unmatched(self, e: dict[str, Any]) -> str:
        raise NotImplementedError


class OffsetIndexCheck(_IndexCheck):
    """An entry must point at the start of a batch whose last offset it names."""

    def feed(self, position: int, header: BatchHeader) -> None:
        entries = self._entries
        while self._next < len(entries) and entries[self._next]["position"] <= position:
            e = entries[self._next]
            if e["position"] < position:
                self.problems.append(self._unmatched(e))
            elif header.last_offset != e["offset"]:
                self.problems.append(f"Index offset: {e['offset']}, log offset: "
                                     f"{header.last_offset}")
            self._next += 1

    def _unmatched(self, e: dict[str, Any]) -> str:
        return f"Index offset: {e['offset']}, position {e['position']}: no batch starts there"


class TimeIndexCheck(_IndexCheck):
    """The batch holding an entry's offset must have the entry's timestamp as its max
    timestamp."""

    def feed(self, position: int, header: BatchHeader) -> None:
        entries = self._entries
        while self._next < len(entries) and entries[self._next]["offset"] <= header.last_offset:
            e = entries[self._next]
            if e["offset"] < header.base_offset:
                self.problems.append(self._unmatched(e))
            elif header.max_timestamp != e["timestamp"]:
                self.problems.append(f"Index timestamp: {e['timestamp']}, log timestamp: "
                                     f"{header.max_timestamp}")
            self._next += 1

    def _unmatched(self, e: dict[str, Any]) -> str:
        return f"Indexed offset: {e['offset']}, no batch holds it in the log"


def _verify(path: Path, check: OffsetIndexCheck | TimeIndexCheck) -> list[str]:
    """`check` fed every batch of the segment's `.log` (up to a torn tail, if any)."""
    log = path.with_suffix(".log")
    if not log.is_file():
        return [f"cannot verify: {log} is missing"]
    try:
        for position, header in iter_headers(_read(log)):
            check.feed(position, header)
    except CorruptRecordError:
        pass  # verify what precedes a torn tail
    return check.finish()


def _emit(path: Path, kind: str, entries: list[dict[str, Any]], problems: list[str],
          args: argparse.Namespace, text: Callable[[dict[str, Any]], str]) -> bool:
    checking = args.verify_index_only or args.index_sanity_check
    if args.json:
        print_json({"file": str(path), "type": kind, "entries": entries, "problems": problems,
                    **({"checked": True} if checking else {})})
        return not problems
    print(f"Dumping {path}")
    if not checking:
        for entry in entries:
            print(text(entry))
    for problem in problems:
        print(problem)
    if checking and not problems:
        print(f"{path} passed the {'verification' if args.verify_index_only else 'sanity check'}"
              f" ({len(entries)} entries).")
    return not problems


def dump_offset_index(path: Path, args: argparse.Namespace) -> bool:
    read = offset_index_entries(_read(path), _base_offset(path))
    problems = read.problems
    if args.verify_index_only and read.ordered:
        problems += _verify(path, OffsetIndexCheck(read.entries))
    return _emit(path, "offset-index", read.entries, problems, args,
                 lambda e: f"offset: {e['offset']} position: {e['position']}")


def dump_time_index(path: Path, args: argparse.Namespace) -> bool:
    read = time_index_entries(_read(path), _base_offset(path))
    problems = read.problems
    if args.verify_index_only and read.ordered:
        problems += _verify(path, TimeIndexCheck(read.entries))
    return _emit(path, "time-index", read.entries, problems, args,
                 lambda e: f"timestamp: {e['timestamp']} offset: {e['offset']}")


def _increasing(entries: list[dict[str, Any]], key: str) -> list[str]:
    return [f"Out of order {key}: {a[key]} then {b[key]}"
            for a, b in pairwise(entries) if b[key] <= a[key]]


def dump_snapshot(path: Path, args: argparse.Namespace) -> bool:
    try:
        producers = decode(_read(path))
    except CorruptSnapshotError as exc:
        return _emit(path, "producer-snapshot", [], [f"damaged snapshot: {exc}"], args, str)
    entries = []
    for p in producers:
        last = p.batches[-1] if p.batches else None
        entries.append({"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                        "coordinator_epoch": p.coordinator_epoch,
                        "current_txn_first_offset": p.current_txn_first_offset,
                        "last_timestamp": p.last_timestamp,
                        "last_sequence": last.last_seq if last else -1,
                        "last_offset": last.last_offset if last else -1,
                        "offset_delta": last.offset_delta if last else 0})
    return _emit(path, "producer-snapshot", entries, [], args, _snapshot_line)


def _snapshot_line(e: dict[str, Any]) -> str:
    return (f"producerId: {e['producer_id']} producerEpoch: {e['producer_epoch']} "
            f"coordinatorEpoch: {e['coordinator_epoch']} currentTxnFirstOffset: "
            f"{e['current_txn_first_offset']} lastTimestamp: {e['last_timestamp']} "
            f"lastSequence: {e['last_sequence']} lastOffset: {e['last_offset']} "
            f"offsetDelta: {e['offset_delta']}")


def dump_txn_index(path: Path, args: argparse.Namespace) -> bool:
    try:
        entries, problems = txn_index_entries(path)
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    return _emit(path, "transaction-index", [t._asdict() for t in entries], problems, args,
                 _txn_line)


def txn_index_entries(path: Path) -> tuple[list[AbortedTxn], list[str]]:
    """The entries of a `.txnindex` as storage reads them (read-only), and its warnings about
    the file (a torn entry, an unknown version) as problems."""
    with warnings_of(transaction_index.log) as problems:
        entries = TransactionIndex(str(path), DEFAULT_FS).entries
    return entries, problems


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def warnings_of(logger: logging.Logger) -> Iterator[list[str]]:
    """What `logger` warns about while the block runs (storage's own verdict on a damaged
    file), collected as problems instead of printed."""
    handler = _Collected()
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _txn_line(e: dict[str, Any]) -> str:
    return (f"producerId: {e['producer_id']} firstOffset: "
            f"{e['first_offset']} lastOffset: {e['last_offset']} lastStableOffset: "
            f"{e['last_stable_offset']}")


DUMPERS: dict[str, Dumper] = {".index": dump_offset_index, ".timeindex": dump_time_index,
                              ".snapshot": dump_snapshot, ".txnindex": dump_txn_index}
