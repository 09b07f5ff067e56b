"""Checking a segment and recovering it: walking its batches from the start, checking each one
while the offset and time indexes are rebuilt from them, saying where the first bad byte lies
(`Damage`) and cutting the log there while keeping the bytes cut; start-up's check of an active
segment's head and tail after a clean shutdown; checking the bytes a read returns that no one
has checked yet; checking index files against the log before they are used. `Segment` calls
these on its own files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from spark_log.records.batch_header import BatchHeader, iter_headers, read_header
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.index.offset_index import OffsetIndex
from spark_log.storage.index.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from spark_log.storage.log.batch_check import (
    CheckedRanges,
    batch_problems,
    check_ahead,
    check_batches,
)
from spark_log.storage.log.file_records import FileRecords

CHECK_AHEAD_BYTES = 256 * 1024  # a read of unchecked bytes checks this far past its end


class Walked(NamedTuple):
    """What a walk from a segment's start found."""

    valid: int  # bytes of whole valid batches from the start
    next_offset: int  # the offset after them
    problem: str | None  # what stopped the walk; None: the end of the file
    max_timestamp: TimestampOffset  # the largest batch max timestamp among them


class Damage(NamedTuple):
    """Where recovery found a segment's first invalid byte, and what lies there."""

    position: int  # bytes before it are whole valid batches
    next_offset: int  # the offset after those batches
    reason: str
    # When a whole batch failed its CRC or offset check (data, not a torn write): the offsets
    # it claims.
    first_offset: int | None
    last_offset: int | None

    @property
    def whole_batch(self) -> bool:
        return self.first_offset is not None


class Recovered(NamedTuple):
    """What recovering a segment found: the offset after its valid batches (the log end once
    it is cut at the damage) and the damage, or None when the whole file is valid."""

    next_offset: int
    damage: Damage | None


def index_batches(log: FileRecords, offset_index: OffsetIndex, time_index: TimeIndex,
                  base_offset: int, index_interval_bytes: int, *, verify: bool,
                  on_batch: Callable[[BatchHeader], None] | None = None,
                  limit_offset: int | None = None) -> Walked:
    """Index every batch from the start (both indexes emptied first, left writable); with
    `verify`, check each batch fully (CRC included) and walk a torn tail too."""
    for index in (offset_index, time_index):
        index.set_writable(True)  # room for every entry while rebuilding
        index.reset()  # (not loaded first: a crashed active index is megabytes of zeros)
    max_ts = TimestampOffset(NO_TIMESTAMP, base_offset)
    valid = last_entry_at = 0
    next_offset = base_offset
    problem = None
    mm = log.map()
    try:
        end = None if verify else log.size  # recovery also walks a torn tail
        for pos, h in iter_headers(mm, 0, end) if mm is not None else ():
            problems = batch_problems(memoryview(mm)[pos : pos + h.size], pos, h,  # type: ignore
                                      base_offset=base_offset, next_offset=next_offset,
                                      limit_offset=limit_offset, crc=verify)
            if problems:
                raise CorruptRecordError(problems[0])
            if h.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(h.max_timestamp, h.last_offset)
            if pos - last_entry_at > index_interval_bytes:
                offset_index.append(h.last_offset, pos)
                time_index.maybe_append(*max_ts)
                last_entry_at = pos
            if on_batch is not None:
                on_batch(h)
            valid, next_offset = pos + h.size, h.next_offset
    except CorruptRecordError as e:
        problem = str(e)
    del mm
    time_index.maybe_append(*max_ts, skip_full_check=True)
    return Walked(valid, next_offset, problem, max_ts)


def damage_found(log: FileRecords, walked: Walked) -> Damage | None:
    """Where a verifying walk stopped, with the offsets of the batch there if it is whole."""
    if walked.problem is None:
        return None
    first_offset = last_offset = None
    mm = log.map()
    try:
        header = read_header(mm, walked.valid)  # type: ignore[arg-type]
        first_offset, last_offset = header.base_offset, header.last_offset
    except CorruptRecordError:
        pass  # a torn write or garbage: no batch to speak of
    del mm
    return Damage(walked.valid, walked.next_offset, walked.problem, first_offset, last_offset)


def cut_log(log: FileRecords, fs: FileSystem, position: int, keep_path: str | None) -> int:
    """Truncate the .log to `position` after copying the bytes cut to `keep_path` (if given,
    fsynced); returns the number of bytes cut."""
    file_size = os.fstat(log.fd).st_size
    if keep_path is not None:
        fd = fs.open(keep_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            done = 0
            while position + done < file_size:
                chunk = os.pread(log.fd, min(1 << 20, file_size - position - done),
                                 position + done)
                if not chunk:
                    break
                fs.write_fully(fd, [chunk], done)
                done += len(chunk)
            fs.fsync(fd)
        finally:
            fs.close(fd)
    log.size = position
    return log.truncate_to(position) if file_size != position else 0


def check_head_and_tail(log: FileRecords, tail: int, base_offset: int,
                        checked: CheckedRanges) -> int | str:
    """Check the first batch and every batch from byte `tail` to the end, adding them to
    `checked`; the offset after the last batch, or the problem found."""
    size = log.size
    mm = log.map()
    try:
        first_end = 0
        if tail > 0:  # else the tail's walk checks the first batch (a segment not yet indexed)
            first_end = read_header(mm, 0).size  # type: ignore[arg-type]
            check_batches(mm, 0, first_end, base_offset=base_offset)  # type: ignore
        last = check_batches(mm, tail, size, base_offset=base_offset)  # type: ignore
    except (CorruptRecordError, CorruptIndexError) as e:
        return f"{log.path}: {e}"
    finally:
        del mm
    checked.add(0, first_end)
    checked.add(tail, size)
    return base_offset if last is None else last.next_offset


def check_unchecked(log: FileRecords, checked: CheckedRanges, start: int, end: int,
                    base_offset: int, limit_offset: int | None) -> None:
    """Check the batches in bytes [start, end) not in `checked` (see `batch_check`), adding
    each range once it passed; CorruptRecordError at the first bad batch. Past `end`, up to
    CHECK_AHEAD_BYTES of unchecked batches are checked too, while they pass."""
    gaps = checked.gaps(start, end)
    if not gaps:
        return
    mm = log.map()
    try:
        for a, b in gaps:
            last = check_batches(mm, a, b, base_offset=base_offset,  # type: ignore[arg-type]
                                 limit_offset=limit_offset)
            checked.add(a, b)
        if mm is not None and last is not None and b == end:
            ahead = checked.gaps(end, min(len(mm), end + CHECK_AHEAD_BYTES))
            if ahead and ahead[0][0] == end:
                reached = check_ahead(mm, end, ahead[0][1], base_offset=base_offset,
                                      next_offset=last.next_offset, limit_offset=limit_offset)
                checked.add(end, reached)
    finally:
        del mm


def indexes_problem(*indexes: OffsetIndex | TimeIndex) -> str | None:
    """Why index files cannot be used as they are (missing or torn), without opening them."""
    for index in indexes:
        size = index.size_on_disk()
        if size is None:
            return f"index file {index.path} is missing"
        reason = index.check_size(size)
        if reason:
            return f"index file {index.path}: {reason}"
    return None


def check_index(index: OffsetIndex | TimeIndex, log: FileRecords) -> None:
    """Load `index` and check it (an offset index also against the log's batch at its last
    entry); CorruptIndexError or CorruptRecordError if it cannot be trusted."""
    index.load()
    if isinstance(index, OffsetIndex):
        index.sanity_check(log.size)
        last = index.last_entry()
        if index.entries and header_at(log, last.position).last_offset != last.offset:
            raise CorruptIndexError(f"corrupt offset index {index.path}: last entry "
                                    f"{tuple(last)} does not match the log")
    else:  # no cross-check with the log: it would need the offset index too
        index.sanity_check()


def header_at(log: FileRecords, position: int) -> BatchHeader:
    for _, header in log.batches(position):
        return header
    raise CorruptRecordError(f"no batch at byte {position} of {log.path}")


def last_offset_readable(log: FileRecords, base_offset: int) -> int:
    """The last offset of the batches a header walk from the start can read (`base_offset` -
    1 if none), trusting no index."""
    last = base_offset - 1
    try:
        for _, header in log.batches():
            last = header.last_offset
    except CorruptRecordError:
        pass
    return last
