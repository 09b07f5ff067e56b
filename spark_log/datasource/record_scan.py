"""Where each record of a v2 records section begins: the one sequential step of decoding.

Records are length-prefixed (a zigzag varint), so finding record i needs records 0..i-1. Two
ways through a section, chosen as it goes:

* runs of equal-sized records (fixed-size values: the offset and timestamp deltas change width
  only every few thousand records): the record at `pos` has size S; the records of the run are
  the consecutive positions pos + k*S whose length prefix has the same bytes as the first one,
  checked with numpy in growing windows. Equal prefix bytes decode to the same length, so by
  induction every position of the run is a record start: this is exact, not a guess;
* anything else: a short Python loop over the length prefixes, a few bytecodes per record.

A failed run check costs a few numpy calls, so after one the scan goes record by record for a
stretch that doubles with every failure (records of varying size pay almost nothing for the
attempts). Bounds are checked once at the end: the records must end exactly at the section end.
"""

from __future__ import annotations

import numpy as np

from spark_log.records import CorruptRecordError

Buffer = bytes | memoryview
MIN_RUN = 16  # a shorter run is not worth its numpy calls
FIRST_WINDOW = 64
MAX_STRETCH = 4096


def record_starts(data: Buffer, arr: np.ndarray, lo: int, hi: int, count: int) -> np.ndarray:
    """Positions (of the length prefix) of the `count` records of data[lo:hi]; raises
    CorruptRecordError unless they end exactly at `hi`. `arr` is `data` as uint8."""
    pieces: list[np.ndarray] = []
    scanned: list[int] = []
    pos, left = lo, count
    stretch = 0 if count >= 2 * MIN_RUN else count
    backoff = MIN_RUN
    try:
        while left:
            if stretch:
                k = min(stretch, left)
                if scanned:
                    pieces.append(np.array(scanned, np.int64))
                    scanned = []
                pos = _scan(data, pos, k, scanned)
                left -= k
                stretch = 0
                continue
            width, length = _prefix(data, pos)
            size = width + length
            run = _run_length(arr, pos, width, size, min(left, (hi - pos) // size)) \
                if length > 0 else 0
            if run >= MIN_RUN:
                if scanned:
                    pieces.append(np.array(scanned, np.int64))
                    scanned = []
                pieces.append(pos + size * np.arange(run, dtype=np.int64))
                pos += size * run
                left -= run
                backoff = MIN_RUN
            else:
                stretch = backoff
                backoff = min(backoff * 2, MAX_STRETCH)
    except IndexError:
        raise CorruptRecordError("records section ends before its record count") from None
    if pos != hi:
        raise CorruptRecordError("record lengths do not add up to the records section")
    if scanned:
        pieces.append(np.array(scanned, np.int64))
    if not pieces:
        return np.zeros(0, np.int64)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _scan(data: Buffer, pos: int, count: int, out: list[int]) -> int:
    """Record by record: appends the prefix position of `count` records, returns the end."""
    add = out.append
    for _ in range(count):
        add(pos)
        b = data[pos]
        if b < 0x80:
            raw = b
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            raw, pos = _long_varint(data, pos)
        length = (raw >> 1) ^ -(raw & 1)
        if length < 0:
            raise CorruptRecordError("negative record length")
        pos += length
    return pos


def _prefix(data: Buffer, pos: int) -> tuple[int, int]:
    """(width, value) of the zigzag varint at `pos`."""
    raw, end = _long_varint(data, pos)
    return end - pos, (raw >> 1) ^ -(raw & 1)


def _long_varint(data: Buffer, pos: int) -> tuple[int, int]:
    raw, shift = 0, 0
    while True:
        if shift > 63:
            raise CorruptRecordError("bad record length varint")
        b = data[pos]
        raw |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if b < 0x80:
            return raw, pos


def _run_length(arr: np.ndarray, pos: int, width: int, size: int, limit: int) -> int:
    """How many records from `pos` on (at most `limit`) have the prefix of the one at `pos`."""
    prefix = arr[pos:pos + width]
    done, window = 1, FIRST_WINDOW
    while done < limit:
        at = pos + size * np.arange(done, min(limit, done + window), dtype=np.int64)
        same = arr[at] == prefix[0]
        for t in range(1, width):
            same &= arr[at + t] == prefix[t]
        if not same.all():
            return done + int(np.argmin(same))
        done += len(at)
        window *= 4
    return limit
