"""Per-record walks of a v2 records section, native when built: `scan_records` (every record's
offset, bounds, key span and value span) and `KeyOffsets` (record key -> latest offset, filled
and queried a section at a time: the log cleaner's offset map and record filter).

`spark_log.records._native_scan` implements both in C (setup.py builds it when a compiler is
there); the pure-Python classes and functions here define the behaviour and stand in when it is
not built. `NATIVE` says which one `KeyOffsets` and `scan_records` are; the tests run both.
Pure functions and in-memory tables, no I/O.
"""

from __future__ import annotations

import importlib
from array import array
from typing import Protocol

from kio.serial.readers import read_signed_varint

from .batch_rewrite import RecordSpan, map_latest_offsets, scan_record_spans
from .errors import CorruptRecordError
from .varint import VARINT_ERRORS

# scan_records' row: offset, start, end, key_pos, key_len, value_pos, value_len (native int64;
# a null key or value has length -1; start..end includes the record's length prefix).
RECORD_FIELDS = 7
OFFSET, START, END, KEY_POS, KEY_LEN, VALUE_POS, VALUE_LEN = range(RECORD_FIELDS)

Section = bytes | bytearray | memoryview


class KeyOffsetTable(Protocol):
    """What both implementations offer."""

    def __len__(self) -> int: ...

    def clear(self) -> None: ...

    def get(self, key: bytes, missing: int = -1) -> int: ...

    def put(self, key: bytes, offset: int) -> None: ...

    def map_records(self, section: Section, count: int, base_offset: int,
                    start_offset: int) -> None: ...

    def kept_records(self, section: Section, count: int, base_offset: int, latest: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]: ...


class PyKeyOffsets:
    """Record key -> latest offset mapped for it, exact (a dict of the key bytes).

    Invariant: holds exactly the keys put or mapped since it was made or cleared. Not
    thread-safe: one owner at a time. `seed` is accepted for the native table's sake.
    """

    def __init__(self, seed: int = 0) -> None:
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def clear(self) -> None:
        self._latest = {}

    def get(self, key: bytes, missing: int = -1) -> int:
        return self._latest.get(bytes(key), missing)

    def put(self, key: bytes, offset: int) -> None:
        self._latest[bytes(key)] = offset

    def map_records(self, section: Section, count: int, base_offset: int,
                    start_offset: int) -> None:
        """Map each keyed record of `section` at or after `start_offset` to its offset, in
        order (later records win); CorruptRecordError if the section does not parse."""
        map_latest_offsets(bytes(section), count, base_offset, self._latest, start_offset)

    def kept_records(self, section: Section, count: int, base_offset: int, latest: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]:
        """(None if every record is kept, else the spans of those kept; whether a kept one is
        a tombstone). A record is kept when its offset is past `latest`, or it has a key whose
        mapped offset is not past its own (or is unmapped) and it has a value or
        `keep_deletes`."""
        spans = scan_record_spans(bytes(section), count, base_offset)
        lookup = self._latest.get
        kept = []
        tombstones = False
        for span in spans:
            offset, key, has_value = span[0], span[1], span[2]
            if offset > latest or (key is not None and (has_value or keep_deletes)
                                   and offset >= lookup(key, -1)):
                kept.append(span)
                tombstones = tombstones or not has_value
        return (None if len(kept) == len(spans) else kept), tombstones


def py_scan_records(section: Section, count: int, base_offset: int) -> bytes:
    """Per record of `section`, RECORD_FIELDS native int64s (see RECORD_FIELDS);
    CorruptRecordError if the records do not fill it exactly or a field overruns its record."""
    data = bytes(section)
    limit = len(data)
    if count < 0 or count > limit // 4 + 1:
        raise CorruptRecordError(f"{count} records cannot fill {limit} bytes")
    rows = array("q")
    pos = 0
    for i in range(count):
        try:
            rows.extend(_record_row(data, pos, limit, base_offset))
        except (IndexError, *VARINT_ERRORS) as exc:
            raise CorruptRecordError(f"record {i}: truncated or bad varint: {exc}") from None
        pos = rows[-RECORD_FIELDS + END]
    if pos != limit:
        raise CorruptRecordError(f"{limit - pos} bytes remain after {count} records")
    return rows.tobytes()


def _record_row(data: bytes, pos: int, limit: int, base_offset: int) -> list[int]:
    start = pos
    length, size = read_signed_varint(data, pos)
    pos += size
    end = pos + length
    if length < 3 or end > limit:
        raise CorruptRecordError(f"invalid record size {length} at byte {start}")
    p = pos + 1  # attributes, then the timestamp delta (skipped)
    while data[p] >= 0x80:
        p += 1
    offset_delta, size = read_signed_varint(data, p + 1)
    p += 1 + size
    key_len, size = read_signed_varint(data, p)
    key_pos = p = p + size
    if key_len >= 0:
        if key_len > limit - p:
            raise CorruptRecordError(f"key of the record at byte {start} is truncated")
        p += key_len
    if p >= end:
        raise CorruptRecordError(f"record at byte {start} overruns its length")
    value_len, size = read_signed_varint(data[:end], p)
    p += size
    if value_len > end - p:
        raise CorruptRecordError(f"value of the record at byte {start} overruns it")
    return [base_offset + offset_delta, start, end, key_pos, max(key_len, -1), p,
            max(value_len, -1)]


try:  # by name: import-linter reads only Python sources and would misplace the compiled module
    _native = importlib.import_module(f"{__package__}._native_scan")
except ImportError:  # not built: no compiler where it was installed
    NativeKeyOffsets: type[KeyOffsetTable] | None = None
    native_scan_records = None
else:
    NativeKeyOffsets = _native.KeyOffsets
    native_scan_records = _native.scan_records

NATIVE = NativeKeyOffsets is not None
KeyOffsets: type[KeyOffsetTable] = NativeKeyOffsets or PyKeyOffsets
scan_records = native_scan_records or py_scan_records
