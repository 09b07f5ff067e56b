"""Checking a segment's batches, and remembering which bytes of its .log have been checked.

Recovery after a crash checks every batch of the segments the crash may have torn; after a
clean shutdown only each segment's tail is checked at start-up. Everything else is checked the
first time a read (a fetch, a coordinator load, the cleaner) reaches it, so damage that appeared
while the broker was stopped — a flipped bit, a cut or overwritten file — is found before any
of it is served, without reading every segment at start-up. Bytes this process appended were
checked when the append was validated.

A read that reaches unchecked bytes also checks ahead of itself, up to 256 KiB more
(stopping quietly at the first batch that fails: the read that reaches it reports it), so a
consumer reading a log back after a restart, a fetch at a time, pays one map of the file per
window rather than one per fetch.

A check is what recovery does to each batch: its length and magic, its CRC-32C, its offsets
increasing and inside the segment (at or above the base offset in the file name, below the
next segment's base offset).
"""

from __future__ import annotations

import bisect

from spark_log.records.batch_header import BatchHeader, compute_crc, read_header
from spark_log.records.errors import CorruptRecordError


class CheckedRanges:
    """Byte ranges [start, end) of a .log file whose batches have been checked.

    Invariants: ranges are sorted, disjoint and not adjacent (touching ranges are merged); each
    starts and ends on a batch boundary. Not thread-safe: the segment's owner serializes calls.
    """

    __slots__ = ("_ranges",)

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        ranges = self._ranges
        if ranges and ranges[-1][0] <= start <= ranges[-1][1]:  # an append: extends the last
            if end > ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], end)
            return
        i = bisect.bisect_left(ranges, (start, start))
        if i > 0 and ranges[i - 1][1] >= start:  # touches the one before
            i -= 1
            start = ranges[i][0]
        j = i
        while j < len(ranges) and ranges[j][0] <= end:
            end = max(end, ranges[j][1])
            j += 1
        ranges[i:j] = [(start, end)]

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) not checked yet."""
        ranges = self._ranges
        if len(ranges) == 1 and ranges[0][0] <= start and end <= ranges[0][1]:
            return []  # the common case: one range covering everything read
        out = []
        position = start
        for a, b in ranges:
            if b <= position:
                continue
            if a >= end:
                break
            if a > position:
                out.append((position, a))
            position = max(position, b)
            if position >= end:
                break
        if position < end:
            out.append((position, end))
        return out

    def truncate(self, size: int) -> None:
        """The file was cut to `size` bytes."""
        self._ranges = [(a, min(b, size)) for a, b in self._ranges if a < size]

    def clear(self) -> None:
        self._ranges = []

    def __repr__(self) -> str:
        return f"CheckedRanges({self._ranges})"


MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # an offset must fit an int32 past its segment's base offset


def batch_problems(batch: memoryview | bytes, position: int, header: BatchHeader, *,
                   base_offset: int, next_offset: int, limit_offset: int | None,
                   crc: bool = True) -> list[str]:
    """What recovery finds wrong with one batch whose header reads (`batch` is its bytes,
    `position` where it lies in its segment): its CRC, a base offset below the segment's (its
    file name) or not above the previous batch's (`next_offset` is the offset after that one),
    a last offset reaching the next segment's base offset or beyond what an index can hold."""
    actual = compute_crc(batch, 0, header.size) if crc else header.crc
    first, last = header.base_offset, header.last_offset  # (without `crc`, actual is the stored)
    if actual == header.crc and base_offset <= first and next_offset <= first and \
            (limit_offset is None or last < limit_offset) and \
            last - base_offset <= MAX_RELATIVE_OFFSET:
        return []  # the usual case, without building the messages below
    where = f"batch at byte {position} (offsets {header.base_offset} to {header.last_offset})"
    problems = []
    if actual != header.crc:
        problems.append(f"{where}: CRC mismatch, stored {header.crc:#010x}, computed "
                        f"{actual:#010x}")
    if header.base_offset < base_offset:
        problems.append(f"{where}: below the segment's base offset {base_offset} (its file "
                        "name)")
    elif header.base_offset < next_offset:
        problems.append(f"{where}: not above offset {next_offset - 1}, the last of an earlier "
                        "batch")
    if limit_offset is not None and header.last_offset >= limit_offset:
        problems.append(f"{where}: not below the next segment's base offset {limit_offset}")
    elif header.last_offset - base_offset > MAX_RELATIVE_OFFSET:
        problems.append(f"{where}: more than {MAX_RELATIVE_OFFSET} offsets past the segment's "
                        "base offset")
    return problems


def check_batches(buf: bytes | memoryview, start: int, end: int, *, base_offset: int,
                  limit_offset: int | None = None) -> BatchHeader | None:
    """Check every batch in buf[start:end], which must start on a batch boundary, as recovery
    does; returns the last batch's header (None if there was none). Raises CorruptRecordError
    naming the first batch that fails (by byte position and, where readable, offsets)."""
    view = memoryview(buf)[:end]
    position, next_offset = start, base_offset
    header = None
    while position < end:
        header = read_header(view, position)
        problems = batch_problems(view[position : position + header.size], position, header,
                                  base_offset=base_offset, next_offset=next_offset,
                                  limit_offset=limit_offset)
        if problems:
            raise CorruptRecordError(problems[0])
        next_offset = header.next_offset
        position += header.size
    return header


def check_ahead(buf: bytes | memoryview, start: int, stop: int, *, base_offset: int,
                next_offset: int, limit_offset: int | None = None) -> int:
    """Check whole batches from `start` (a batch boundary) while they end at or before `stop`;
    the position after the last one that passed. Never raises: it stops at the first batch
    that is cut short or fails (the read that reaches it reports it)."""
    view = memoryview(buf)[:stop]
    position = start
    while position < stop:
        try:
            header = read_header(view, position)
        except (ValueError, CorruptRecordError):
            break
        if position + header.size > stop or batch_problems(
                view[position : position + header.size], position, header,
                base_offset=base_offset, next_offset=next_offset, limit_offset=limit_offset):
            break
        next_offset = header.next_offset
        position += header.size
    return position
