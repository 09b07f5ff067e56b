"""`dump-log` for the files beside a segment: `.index` (offset -> position), `.timeindex`
(timestamp -> offset), `.snapshot` (producer state) and `.txnindex` (aborted transactions).

Index entries print as Kafka prints them; a preallocated index of an active segment ends at
its first zero entry. `--verify-index-only` checks each entry against the segment's `.log`
instead of printing it: an offset index entry must point at the start of a batch whose last
offset it names, a time index entry must name a batch whose max timestamp it holds, and both
must increase. `--index-sanity-check` checks only that entries increase.
"""

from __future__ import annotations

import argparse
import bisect
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

from spark_log.records import BatchHeader, CorruptRecordError, iter_headers
from spark_log.storage import transaction_index
from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.offset_index import OffsetIndex
from spark_log.storage.producer_snapshot import CorruptSnapshotError, decode
from spark_log.storage.time_index import TimeIndex
from spark_log.storage.transaction_index import TransactionIndex

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


def _entries(path: Path, size: int, unpack: Any) -> tuple[list[tuple[int, int]], list[str]]:
    """Raw entries up to the first all-zero one after the first (preallocated space), and the
    problem of a file that does not hold whole entries."""
    data = _read(path)
    torn = len(data) % size
    problems = [f"{path}: {torn} byte(s) at the end are not a whole {size}-byte entry"] \
        if torn else []
    entries = []
    for slot in range(len(data) // size):
        entry = unpack(data, slot * size)
        if slot > 0 and not any(entry):
            break
        if slot == 0 and not any(entry) and not any(data[size:2 * size]):
            break
        entries.append(entry)
    return entries, problems


def _log_headers(index_path: Path) -> list[BatchHeader] | None:
    log = index_path.with_suffix(".log")
    if not log.is_file():
        return None
    headers = []
    try:
        for _, header in iter_headers(_read(log)):
            headers.append(header)
    except CorruptRecordError:
        pass  # verify what precedes a torn tail
    return headers


def _positions(headers: list[BatchHeader]) -> dict[int, BatchHeader]:
    positions, at = {}, 0
    for h in headers:
        positions[at] = h
        at += h.size
    return positions


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
    base = _base_offset(path)
    raw, problems = _entries(path, OffsetIndex.ENTRY.size, OffsetIndex.ENTRY.unpack_from)
    entries = [{"offset": base + rel, "position": pos} for rel, pos in raw]
    problems += _increasing(entries, "offset") + _increasing(entries, "position")
    if args.verify_index_only:
        problems += _verify_offsets(path, entries)
    return _emit(path, "offset-index", entries, problems, args,
                 lambda e: f"offset: {e['offset']} position: {e['position']}")


def _verify_offsets(path: Path, entries: list[dict[str, Any]]) -> list[str]:
    headers = _log_headers(path)
    if headers is None:
        return [f"cannot verify: {path.with_suffix('.log')} is missing"]
    positions = _positions(headers)
    problems = []
    for e in entries:
        batch = positions.get(e["position"])
        if batch is None:
            problems.append(f"Index offset: {e['offset']}, position {e['position']}: no batch "
                            "starts there")
        elif batch.last_offset != e["offset"]:
            problems.append(f"Index offset: {e['offset']}, log offset: {batch.last_offset}")
    return problems


def dump_time_index(path: Path, args: argparse.Namespace) -> bool:
    base = _base_offset(path)
    raw, problems = _entries(path, TimeIndex.ENTRY.size, TimeIndex.ENTRY.unpack_from)
    entries = [{"timestamp": ts, "offset": base + rel} for ts, rel in raw]
    problems += _increasing(entries, "timestamp")
    if args.verify_index_only:
        problems += _verify_times(path, entries)
    return _emit(path, "time-index", entries, problems, args,
                 lambda e: f"timestamp: {e['timestamp']} offset: {e['offset']}")


def _verify_times(path: Path, entries: list[dict[str, Any]]) -> list[str]:
    headers = _log_headers(path)
    if headers is None:
        return [f"cannot verify: {path.with_suffix('.log')} is missing"]
    lasts = [h.last_offset for h in headers]
    problems = []
    for e in entries:
        i = bisect.bisect_left(lasts, e["offset"])
        if i == len(headers) or headers[i].base_offset > e["offset"]:
            problems.append(f"Indexed offset: {e['offset']}, no batch holds it in the log")
        elif headers[i].max_timestamp != e["timestamp"]:
            problems.append(f"Index timestamp: {e['timestamp']}, log timestamp: "
                            f"{headers[i].max_timestamp}")
    return problems


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
    with _warnings_of(transaction_index.log) as problems:
        entries = [t._asdict() for t in TransactionIndex(str(path), DEFAULT_FS).entries]
    return _emit(path, "transaction-index", entries, problems, args, _txn_line)


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _warnings_of(logger: logging.Logger) -> Iterator[list[str]]:
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
