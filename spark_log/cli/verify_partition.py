"""`dump-log --verify`, one partition directory: its segments batch by batch, their indexes, its
producer snapshots and leader-epoch-checkpoint, and its leftovers (see `verify_data_dir`).

Every file is opened read-only and read with plain reads, never mapped: a running broker may
resize or delete a file while it is read, and a shrunk mapping would kill the process. A
`.log` is read in chunks, so a segment of any size costs a few megabytes; its batches are
checked one after another (size, magic, CRC-32C, offsets increasing inside the segment and
across segments), and its `.index`, `.timeindex` and `.txnindex` are matched against them as
they go by (`dump_index`'s checks, and storage's own for the transaction index and the leader
epochs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from spark_log.metadata.metadata_topic import METADATA_LOG_DIR
from spark_log.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    decode_batch,
    peek_size,
    read_end_transaction_marker,
    read_header,
)
from spark_log.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.index.transaction_index import AbortedTxn, TransactionIndex
from spark_log.storage.log.batch_check import batch_problems
from spark_log.storage.log.leader_epoch import LeaderEpochCache
from spark_log.storage.log.segment_files import (
    CLEANED_SUFFIX,
    DAMAGED_FILE,
    DELETED_SUFFIX,
    SEGMENT_FILE,
    SWAP_SUFFIX,
)
from spark_log.storage.producer_state.producer_snapshot import (
    SNAPSHOT_FILE,
    CorruptSnapshotError,
    decode,
)

from .dump_index import (
    OffsetIndexCheck,
    TimeIndexCheck,
    offset_index_entries,
    time_index_entries,
    txn_index_entries,
)
from .verify_report import Report, without_path

CHUNK = 8 << 20  # bytes of a .log read at a time
_BYTES_LEFT = re.compile(r"\(\d+ bytes left\)")


@dataclass
class PartitionFacts:
    """What the rest of the data directory is checked against: the log end offset (the offset
    after the last whole batch; the last segment's base offset if it has none) and the largest
    producer id in the log or its snapshots (-1: none)."""

    log_end_offset: int
    max_producer_id: int = -1


@dataclass
class _Walk:
    """State carried from batch to batch, across the segments of one partition.

    Invariant: `next_offset` is None until a batch was read, then the offset after the highest
    last offset read so far."""

    log_start: int
    next_offset: int | None = None
    first_of_epoch: dict[int, int] = field(default_factory=dict)  # from the log start on
    max_producer_id: int = -1
    open_txns: set[int] = field(default_factory=set)  # producers with data since their marker


def verify_partition(directory: Path, log_start: int, report: Report,
                     recovers_from: int | None = None) -> PartitionFacts | None:
    """Check every file of a partition directory; None if it cannot be listed.
    `recovers_from`: the recovery point, if the next start recovers the log from there."""
    try:
        names = list_files(directory)
    except OSError as exc:
        report.problem(directory, f"cannot be read: {exc.strerror or exc}")
        return None
    segments: dict[int, set[str]] = {}
    snapshots: list[int] = []
    for name, regular in names:
        if not regular:
            _not_regular(directory / name, report)
        elif m := SEGMENT_FILE.fullmatch(name):
            segments.setdefault(int(m.group(1)), set()).add(m.group(2))
        elif m := SNAPSHOT_FILE.fullmatch(name):
            snapshots.append(int(m.group(1)))
        elif name != LEADER_EPOCH_CHECKPOINT:
            _other_file(directory / name, report)
    walk = _Walk(log_start)
    bases = sorted(b for b, suffixes in segments.items() if ".log" in suffixes)
    for base, suffixes in sorted(segments.items()):
        if ".log" not in suffixes:
            for suffix in sorted(suffixes):
                report.note(directory / f"{base:020d}{suffix}", "an index file without its "
                            ".log: a broker start deletes it")
    if not bases:
        report.problem(directory, "no segment (.log) files: the broker starts the partition "
                                  "empty at its log start offset")
    for i, base in enumerate(bases):
        _verify_segment(directory, base, bases[i + 1] if i + 1 < len(bases) else None,
                        segments[base], walk, report, recovers_from)
    end = _log_end(walk, bases)
    facts = PartitionFacts(end, walk.max_producer_id)
    for offset in snapshots:
        _verify_snapshot(directory / f"{offset:020d}.snapshot", offset, facts, report)
    if (LEADER_EPOCH_CHECKPOINT, False) not in names:
        _verify_epochs(directory / LEADER_EPOCH_CHECKPOINT, walk, end, report, recovers_from)
    return facts


def list_files(directory: Path) -> list[tuple[str, bool]]:
    """(name, whether it is a regular file) of each entry, sorted. Only regular files are
    opened: a FIFO would block a read."""
    with os.scandir(directory) as entries:
        return sorted((e.name, _is_regular(e)) for e in entries)


def _is_regular(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _not_regular(path: Path, report: Report) -> None:
    """A directory, FIFO, socket or device (or a dangling link) in a partition directory."""
    name = path.name
    if SEGMENT_FILE.fullmatch(name) or SNAPSHOT_FILE.fullmatch(name) or \
            name == LEADER_EPOCH_CHECKPOINT:
        report.problem(path, "not a regular file: the broker cannot use it")
    else:
        report.note(path, "not a file the broker uses (it ignores it)")


def _log_end(walk: _Walk, bases: list[int]) -> int:
    if not bases:
        return walk.log_start
    return max(walk.next_offset or 0, bases[-1])


# The metadata log's directory (METADATA_LOG_DIR) also holds the quorum's election state and
# its snapshots.
QUORUM_STATE = "quorum-state"
METADATA_SNAPSHOT = re.compile(r"[0-9]{20}-[0-9]{10}\.checkpoint(\.part|\.deleted)?")


def _other_file(path: Path, report: Report) -> None:
    """Anything in a partition directory that is not a segment file, snapshot or the
    leader-epoch-checkpoint: leftovers the broker finishes or removes, or files it ignores."""
    name = path.name
    if path.parent.name == METADATA_LOG_DIR and (name == QUORUM_STATE or
                                                 METADATA_SNAPSHOT.fullmatch(name)):
        return  # the controller quorum's own files (read by the quorum at start)
    if name.endswith(DELETED_SUFFIX):
        report.note(path, "a deleted segment's file waiting for its removal: a broker start "
                          "removes it")
    elif name.endswith(".tmp"):
        report.note(path, "a write in progress, or left by an interrupted one: a broker start "
                          "removes it")
    elif name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
        report.note(path, "a log compaction swap in progress, or left by an interrupted one: "
                          "a broker start rolls it back or completes it")
    elif DAMAGED_FILE.fullmatch(name):
        report.note(path, "bytes a recovery cut from the log, kept for inspection (not part "
                          "of the log; read it with dump-log --files)")
    else:
        report.note(path, "not a file the broker uses (it ignores it)")


# ---- one segment ------------------------------------------------------------------------

class _SegmentChecks:
    """The checks fed each batch of one segment: its offset, time and transaction indexes.

    Invariant: an index is matched against the log only if its entries are in order (else
    its order problem is all that is reported for it)."""

    def __init__(self, directory: Path, base: int, following: int | None,
                 suffixes: set[str], report: Report) -> None:
        self.paths = {s: directory / f"{base:020d}{s}" for s in (".index", ".timeindex",
                                                                 ".txnindex")}
        self.index = self._index(".index", base, suffixes, report)
        self.time_index = self._index(".timeindex", base, suffixes, report)
        self.txn = _txn_check(self.paths[".txnindex"], base, following, report) \
            if ".txnindex" in suffixes else _TxnIndexCheck([])

    def _index(self, suffix: str, base: int, suffixes: set[str], report: Report
               ) -> OffsetIndexCheck | TimeIndexCheck | None:
        path = self.paths[suffix]
        if suffix not in suffixes:
            report.note(path, "missing: the broker rebuilds it from the log")
            return None
        data = _read(path, report)
        if data is None:
            return None
        reader = offset_index_entries if suffix == ".index" else time_index_entries
        read = reader(data, base)
        for problem in read.problems:
            report.problem(path, problem)
        if not read.ordered:
            return None
        return OffsetIndexCheck(read.entries) if suffix == ".index" else \
            TimeIndexCheck(read.entries)

    def feed(self, position: int, header: BatchHeader, raw: memoryview, walk: _Walk) -> None:
        for check in (self.index, self.time_index):
            if check is not None:
                check.feed(position, header)
        self.txn.feed(header, raw, walk.open_txns)

    def finish(self, report: Report) -> None:
        for suffix, check in ((".index", self.index), (".timeindex", self.time_index),
                              (".txnindex", self.txn)):
            if check is not None:
                for problem in check.finish():
                    report.problem(self.paths[suffix], problem)


def _verify_segment(directory: Path, base: int, following: int | None, suffixes: set[str],
                    walk: _Walk, report: Report, recovers_from: int | None) -> None:
    path = directory / f"{base:020d}.log"
    checks = _SegmentChecks(directory, base, following, suffixes, report)
    report.segments += 1
    try:
        with open(path, "rb") as f:
            reader = BatchReader(f, os.fstat(f.fileno()).st_size)
            for position, header, raw in reader:
                report.batches += 1
                for problem in batch_problems(
                        raw, position, header, base_offset=base, limit_offset=following,
                        next_offset=base if walk.next_offset is None else walk.next_offset):
                    report.problem(path, problem)
                _remember(header, walk)
                checks.feed(position, header, raw, walk)
    except OSError as exc:
        report.problem(path, f"cannot be read: {exc.strerror or exc}")
        return
    if reader.tail is not None:
        position, reason = reader.tail
        start = max(base if walk.next_offset is None else walk.next_offset, base)
        torn = (f"torn or garbage tail at byte {position}: {reader.size - position} bytes that "
                f"are not a whole batch ({reason}); offsets from {start} on are not in this "
                "segment")
        if following is None and recovers_from is not None and start >= recovers_from:
            # A write that SIGKILL or a crash cut short (the kernel stops a write between pages
            # for a fatal signal), past what was flushed: recovery cuts it, as Kafka's does.
            report.note(path, f"{torn}: an unflushed write cut short, past the recovery point "
                              f"{recovers_from}; the next start's recovery cuts it")
        else:
            report.problem(path, torn)
    checks.finish(report)


def _remember(h: BatchHeader, walk: _Walk) -> None:
    walk.next_offset = max(walk.next_offset or 0, h.next_offset)
    if h.producer_id > walk.max_producer_id:
        walk.max_producer_id = h.producer_id
    if h.partition_leader_epoch >= 0 and h.last_offset >= walk.log_start:
        walk.first_of_epoch.setdefault(h.partition_leader_epoch,
                                       max(h.base_offset, walk.log_start))


class BatchReader:
    """The whole batches of an open `.log` as (position, header, bytes), read in chunks.

    Invariants: `_buf` holds the file's bytes from `_start` on, and the file's read position
    is just past them; `size` is the file's size when opened (what a broker appends later is
    not read), lowered if the file turns out shorter. After iteration, `tail` is None or the
    position where the file stops holding whole batches and why."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f, self.size = f, size
        self._buf, self._start = b"", 0
        self.tail: tuple[int, str] | None = None

    def _view(self, position: int, wanted: int) -> memoryview:
        """The bytes from `position` on, at least `wanted` of them unless the file ends."""
        end = min(position + wanted, self.size)
        have = self._start + len(self._buf)
        if have < end:
            more = self._f.read(min(max(CHUNK, end - have), self.size - have))
            self._buf = self._buf[position - self._start:] + more
            self._start = position
            if self._start + len(self._buf) < end:  # shrunk while read
                self.size = self._start + len(self._buf)
        return memoryview(self._buf)[position - self._start:]

    def __iter__(self) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        position = 0
        while position < self.size:
            view = self._view(position, HEADER_SIZE)
            whole = peek_size(view)
            if whole is not None and HEADER_SIZE < whole <= self.size - position:
                view = self._view(position, whole)
            try:
                header = read_header(view)
            except CorruptRecordError as exc:
                self.tail = position, _reason(exc, self.size - position)
                return
            yield position, header, view[:header.size]
            position += header.size


def _reason(exc: CorruptRecordError, left: int) -> str:
    """read_header's words without its position (one inside the chunk read, not the file),
    with the bytes left in the file."""
    return _BYTES_LEFT.sub(f"({left} bytes left)", str(exc).split(": ", 1)[-1])


# ---- transaction index ------------------------------------------------------------------

def _txn_check(path: Path, base: int, following: int | None, report: Report
               ) -> _TxnIndexCheck:
    """Storage's own check of the file (whole entries of a known version, in order, inside
    the segment), then its entries to match against the log."""
    try:
        problem = TransactionIndex(str(path), DEFAULT_FS).problem(base, following)
        entries = [] if problem else txn_index_entries(path)[0]
    except OSError as exc:
        problem, entries = f"cannot be read: {exc.strerror or exc}", []
    if problem:
        report.problem(path, without_path(problem, path))
        return _TxnIndexCheck(None)
    return _TxnIndexCheck(entries)


class _TxnIndexCheck:
    """A segment's aborted transactions matched against its batches: each entry's marker
    offset must hold an ABORT marker of its producer, and an ABORT marker ending a transaction
    that wrote data here must have an entry (unless the index could not be read: None).

    Invariant: `_by_marker` holds the entries not matched yet, by marker offset."""

    def __init__(self, entries: list[AbortedTxn] | None) -> None:
        self._known = entries is not None
        self._by_marker = {e.last_offset: e for e in entries or ()}
        self.problems: list[str] = []

    def feed(self, h: BatchHeader, raw: memoryview, open_txns: set[int]) -> None:
        if h.producer_id < 0 or not h.is_transactional:
            return
        if not h.is_control:
            open_txns.add(h.producer_id)
            return
        entry = self._by_marker.pop(h.base_offset, None)
        aborted = _marker_type(raw) == ControlRecordType.ABORT
        if entry is not None and (entry.producer_id != h.producer_id or not aborted):
            self.problems.append(f"entry of producer {entry.producer_id}: offset "
                                 f"{entry.last_offset} is not its ABORT marker")
        elif entry is None and aborted and h.producer_id in open_txns and self._known:
            self.problems.append(f"no entry for the transaction of producer {h.producer_id} "
                                 f"aborted at offset {h.base_offset}")
        open_txns.discard(h.producer_id)

    def finish(self) -> list[str]:
        self.problems += [f"entry of producer {e.producer_id}: no batch of the log holds its "
                          f"ABORT marker at offset {e.last_offset}"
                          for e in self._by_marker.values()]
        self._by_marker = {}
        return self.problems


def _marker_type(raw: memoryview) -> ControlRecordType | None:
    try:
        marker = read_end_transaction_marker(decode_batch(raw))
    except (CorruptRecordError, ValueError):
        return None  # a damaged batch: its CRC problem is reported
    return None if marker is None else marker.type


# ---- snapshots and leader epochs ----------------------------------------------------------

def _verify_snapshot(path: Path, offset: int, facts: PartitionFacts, report: Report) -> None:
    data = _read(path, report)
    if data is None:
        return
    try:
        producers = decode(data)
    except CorruptSnapshotError as exc:
        report.problem(path, f"damaged producer snapshot: {exc}")
        return
    if offset > facts.log_end_offset:
        report.problem(path, f"a snapshot at offset {offset}, past the log end offset "
                             f"{facts.log_end_offset}")
    for producer in producers:
        facts.max_producer_id = max(facts.max_producer_id, producer.producer_id)


def _verify_epochs(path: Path, walk: _Walk, log_end: int, report: Report,
                   recovers_from: int | None) -> None:
    """The leader-epoch-checkpoint as storage reads it, its entries inside the log, and the
    epoch it gives the first batch of each leader epoch in the log. The broker writes an epoch
    before its recovery point passes the epoch's first batch; recovery finds the later ones."""
    firsts = {epoch: offset for epoch, offset in walk.first_of_epoch.items()
              if recovers_from is None or offset < recovers_from}
    if not path.exists():
        if firsts:
            report.problem(path, f"missing, but batches carry leader epochs {sorted(firsts)}")
        return
    try:
        cache = LeaderEpochCache(str(path), DEFAULT_FS)
    except (OSError, UnicodeDecodeError) as exc:
        report.problem(path, f"cannot be read: {getattr(exc, 'strerror', None) or exc}")
        return
    if cache.problem is not None:
        report.problem(path, without_path(cache.problem, path))
        return
    for entry in cache.entries:
        if entry.start_offset > log_end:
            report.problem(path, f"epoch {entry.epoch} starts at offset {entry.start_offset}, "
                                 f"past the log end offset {log_end}")
    for epoch, offset in sorted(firsts.items()):
        found = cache.epoch_for_offset(offset)
        if found != epoch:
            given = "no epoch" if found is None else f"epoch {found}"
            report.problem(path, f"the batches of leader epoch {epoch} start at offset "
                                 f"{offset}, but the checkpoint gives that offset {given}")


def _read(path: Path, report: Report) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        report.problem(path, f"cannot be read: {exc.strerror or exc}")
        return None
