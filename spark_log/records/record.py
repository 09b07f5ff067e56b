"""A v2 record: the `Record` value and the codec of a batch's records section.

Wire layout of one record (all varints zigzag, see `varint`)::

    length varint          bytes that follow, up to the end of the headers
    attributes int8        unused, written as 0
    timestampDelta varlong from the batch's base timestamp
    offsetDelta varint     from the batch's base offset
    keyLength varint, key  length -1 means null
    valueLength varint, value
    headerCount varint, then per header: keyLength varint, key (UTF-8), valueLength varint, value

Decoding follows Kafka's `DefaultRecord.readFrom`: any negative key/value length reads as null,
a negative header count or header key length, a header count larger than the bytes left, or a
record whose fields do not end exactly at its declared length is corrupt. Header keys that are
not valid UTF-8 decode with U+FFFD replacements, as Java's `new String(bytes, UTF_8)` does.

The decode loop is the hot path: it runs over one bytes object, inlines the one-byte varint case
and builds each `Record` with `tuple.__new__`, about 5x cheaper than a frozen dataclass.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from kio.serial.readers import read_signed_varint, read_signed_varlong

from .errors import CorruptRecordError
from .varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    VARINT_ERRORS,
    ZIGZAG_BYTE,
    write_varint,
)

Header = tuple[str, bytes | None]
NO_TIMESTAMP = -1
_BYTES_LIKE = (bytes, bytearray, memoryview)


class Record(NamedTuple):
    """One record with its absolute offset and timestamp (ms since the epoch).

    Immutable and hashable; `headers` is a tuple of (key, value) pairs in wire order, keys may
    repeat. Safe to share between threads.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class RecordsSummary(NamedTuple):
    """What the batch header needs to know about an encoded records section."""

    count: int
    last_offset_delta: int
    max_timestamp: int


def encode_records(
    records: Iterable[Record], out: bytearray, base_offset: int, base_timestamp: int
) -> RecordsSummary:
    """Append the records section for `records` to `out`.

    Offsets must be strictly increasing and within int32 of `base_offset` (compacted batches
    keep gaps); timestamps are >= 0 or NO_TIMESTAMP. Raises ValueError on any field the format
    cannot hold.
    """
    count, prev_offset, max_timestamp = 0, base_offset - 1, NO_TIMESTAMP
    body = bytearray()
    for record in records:
        offset, timestamp = record.offset, record.timestamp
        if offset <= prev_offset:
            raise ValueError(f"record offset {offset} does not follow {prev_offset}")
        if offset - base_offset > INT32_MAX:
            raise ValueError(f"record offset {offset} is beyond int32 of base {base_offset}")
        if timestamp < NO_TIMESTAMP:  # Kafka's builder refuses these too
            raise ValueError(f"invalid negative timestamp {timestamp}")
        if not INT64_MIN <= timestamp - base_timestamp <= INT64_MAX:
            raise ValueError(f"record timestamp {timestamp} out of range of the base timestamp")
        body.clear()
        body.append(0)  # attributes
        write_varint(body, timestamp - base_timestamp)
        write_varint(body, offset - base_offset)
        _write_bytes(body, record.key, "key")
        _write_bytes(body, record.value, "value")
        write_varint(body, len(record.headers))
        for header_key, header_value in record.headers:
            if not isinstance(header_key, str):
                raise ValueError(f"header key must be str, got {type(header_key).__name__}")
            _write_bytes(body, header_key.encode(), "header key")
            _write_bytes(body, header_value, "header value")
        write_varint(out, len(body))
        out += body
        count += 1
        prev_offset = offset
        max_timestamp = max(max_timestamp, timestamp)
    return RecordsSummary(count, prev_offset - base_offset, max_timestamp)


def _write_bytes(out: bytearray, value: bytes | None, what: str) -> None:
    if value is None:
        out.append(1)  # zigzag(-1)
        return
    if not isinstance(value, _BYTES_LIKE):
        raise ValueError(f"record {what} must be bytes or None, got {type(value).__name__}")
    if len(value) > INT32_MAX:
        raise ValueError(f"record {what} of {len(value)} bytes exceeds the int32 length limit")
    write_varint(out, len(value))
    out += value


# Long: the hot decoding loop, inlined on purpose; a helper call per field costs more than
# the decoding itself.
def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> tuple[Record, ...]:
    """Decode `count` records from data[pos:end], which they must fill exactly.

    With `log_append_time` set (LOG_APPEND_TIME batches) every record takes that timestamp.
    Raises CorruptRecordError naming the record and byte position of the first fault.
    """
    zz, new, rv, rl = ZIGZAG_BYTE, tuple.__new__, read_signed_varint, read_signed_varlong
    records: list[Record] = []
    append = records.append
    start = pos
    try:
        for _ in range(count):
            start = pos
            if pos >= end:
                raise CorruptRecordError("incorrect declared batch size, premature EOF reached")
            b = data[pos]
            if b < 0x80:
                length, pos = zz[b], pos + 1
            else:
                length, size = rv(data, pos)
                pos += size
            if length < 0 or length > end - pos:
                raise CorruptRecordError(
                    f"invalid record size {length}, {end - pos} bytes left in the batch"
                )
            rec_end = pos + length
            pos += 1  # attributes: unused by v2
            b = data[pos]
            if b < 0x80:
                ts_delta, pos = zz[b], pos + 1
            else:
                ts_delta, size = rl(data, pos)  # bits past 64 are dropped, as Java does
                pos += size
            b = data[pos]
            if b < 0x80:
                offset_delta, pos = zz[b], pos + 1
            else:
                offset_delta, size = rv(data, pos)
                pos += size
                if not INT32_MIN <= offset_delta <= INT32_MAX:
                    raise CorruptRecordError(f"offset delta {offset_delta} out of range")
            b = data[pos]
            if b < 0x80:
                n, pos = zz[b], pos + 1
            else:
                n, size = rv(data, pos)
                pos += size
            if n < 0:
                key = None
            elif n > rec_end - pos:
                raise CorruptRecordError(f"key of {n} bytes overruns the record")
            else:
                key, pos = data[pos : pos + n], pos + n
            b = data[pos]
            if b < 0x80:
                n, pos = zz[b], pos + 1
            else:
                n, size = rv(data, pos)
                pos += size
            if n < 0:
                value = None
            elif n > rec_end - pos:
                raise CorruptRecordError(f"value of {n} bytes overruns the record")
            else:
                value, pos = data[pos : pos + n], pos + n
            b = data[pos]
            if b < 0x80:
                n, pos = zz[b], pos + 1
            else:
                n, size = rv(data, pos)
                pos += size
            if n:
                headers, pos = _decode_headers(data, pos, rec_end, n)
            else:
                headers = ()
            if pos != rec_end:
                raise CorruptRecordError(
                    f"invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {length + pos - rec_end}"
                )
            timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
            append(new(Record, (base_offset + offset_delta, timestamp, key, value, headers)))
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record {len(records)} at byte {start}: {exc}") from None
    except VARINT_ERRORS as exc:
        raise CorruptRecordError(
            f"record {len(records)} at byte {start}: incorrect declared batch size or bad "
            f"varint: {exc}"
        ) from None
    if pos != end:
        raise CorruptRecordError(
            f"incorrect declared batch size, {end - pos} bytes remain after {count} records"
        )
    return tuple(records)


def _decode_headers(data: bytes, pos: int, rec_end: int, count: int) -> tuple[tuple, int]:
    """Decode `count` headers at `pos`; return them and the position after them."""
    if count < 0:
        raise CorruptRecordError(f"invalid number of record headers {count}")
    if count > rec_end - pos:
        raise CorruptRecordError(
            f"invalid number of record headers {count}, larger than the {rec_end - pos} "
            "bytes left in the record"
        )
    zz, rv = ZIGZAG_BYTE, read_signed_varint
    headers = []
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            n, pos = zz[b], pos + 1
        else:
            n, size = rv(data, pos)
            pos += size
        if n < 0:
            raise CorruptRecordError(f"invalid negative header key size {n}")
        if n > rec_end - pos:
            raise CorruptRecordError(f"header key of {n} bytes overruns the record")
        key = data[pos : pos + n].decode("utf-8", "replace")
        pos += n
        b = data[pos]
        if b < 0x80:
            n, pos = zz[b], pos + 1
        else:
            n, size = rv(data, pos)
            pos += size
        if n < 0:
            value = None
        elif n > rec_end - pos:
            raise CorruptRecordError(f"header value of {n} bytes overruns the record")
        else:
            value, pos = data[pos : pos + n], pos + n
        headers.append((key, value))
    return tuple(headers), pos


def _record_head(data: bytes, pos: int, end: int) -> tuple[int, int, int, int]:
    """Of the record at `pos`: where it ends, its offset delta, its key length and where its key
    starts. CorruptRecordError if its length does not fit in data[pos:end]. (`decode_records`
    and `scan_keys` inline the same reads: they are on the produce and fetch paths, where a call
    per record costs 5-10%.)"""
    zz = ZIGZAG_BYTE
    if pos >= end:
        raise CorruptRecordError("incorrect declared batch size, premature EOF reached")
    b = data[pos]
    if b < 0x80:
        length, pos = zz[b], pos + 1
    else:
        length, size = read_signed_varint(data, pos)
        pos += size
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"invalid record size {length}, {end - pos} bytes left in the "
                                 f"batch")
    field = pos + 1  # skip attributes, then the timestamp delta
    field += 1 if data[field] < 0x80 else read_signed_varlong(data, field)[1]
    b = data[field]
    if b < 0x80:
        offset_delta, field = zz[b], field + 1
    else:
        offset_delta, size = read_signed_varint(data, field)
        field += size
    b = data[field]
    if b < 0x80:
        key_length, field = zz[b], field + 1
    else:
        key_length, size = read_signed_varint(data, field)
        field += size
    return pos + length, offset_delta, key_length, field


def scan_keys(
    data: bytes, pos: int, end: int, count: int, base_offset: int
) -> list[tuple[int, bytes | None]]:
    """(offset, key) of each of `count` records in data[pos:end], skipping values and headers
    without decoding them: each record's length locates the next one.

    Checks only what it reads; `decode_records` validates the rest.
    """
    zz, rv, rl = ZIGZAG_BYTE, read_signed_varint, read_signed_varlong
    keys: list[tuple[int, bytes | None]] = []
    append = keys.append
    start = pos
    try:
        for _ in range(count):
            start = pos
            if pos >= end:
                raise CorruptRecordError("incorrect declared batch size, premature EOF reached")
            b = data[pos]
            if b < 0x80:
                length, pos = zz[b], pos + 1
            else:
                length, size = rv(data, pos)
                pos += size
            if length < 0 or length > end - pos:
                raise CorruptRecordError(
                    f"invalid record size {length}, {end - pos} bytes left in the batch"
                )
            rec_end = pos + length
            field = pos + 1  # skip attributes, then the timestamp delta
            if data[field] < 0x80:
                field += 1
            else:
                field += rl(data, field)[1]
            b = data[field]
            if b < 0x80:
                offset_delta, field = zz[b], field + 1
            else:
                offset_delta, size = rv(data, field)
                field += size
            b = data[field]
            if b < 0x80:
                n, field = zz[b], field + 1
            else:
                n, size = rv(data, field)
                field += size
            if n > rec_end - field or field > rec_end:
                raise CorruptRecordError(f"key of {n} bytes overruns the record")
            append((base_offset + offset_delta, None if n < 0 else data[field : field + n]))
            pos = rec_end
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record {len(keys)} at byte {start}: {exc}") from None
    except VARINT_ERRORS as exc:
        raise CorruptRecordError(f"record {len(keys)} at byte {start}: bad varint: {exc}") from None
    if pos != end:
        raise CorruptRecordError(
            f"incorrect declared batch size, {end - pos} bytes remain after {count} records"
        )
    return keys


def record_values(data: bytes, pos: int, end: int, count: int) -> list[bytes] | None:
    """The values of `count` records in data[pos:end] whose offset deltas are 0, 1, 2, ... and
    which have no headers and no null value (a quorum batch's records), without building a
    `Record` each (half the cost, on a start that reads a whole metadata log); None for
    anything else, malformed or not, which `decode_records` then reads, or names the fault of.
    """
    zz = ZIGZAG_BYTE
    values: list[bytes] = []
    append = values.append
    try:
        for expected_delta in range(count):
            rec_end, offset_delta, n, field = _record_head(data, pos, end)
            if offset_delta != expected_delta or n > rec_end - field:
                return None
            field += max(n, 0)  # the key, not kept
            b = data[field]
            if b < 0x80:
                n, field = zz[b], field + 1
            else:
                n, size = read_signed_varint(data, field)
                field += size
            if n < 0 or field + n + 1 != rec_end or data[field + n] != 0:  # no header
                return None
            append(data[field : field + n])
            pos = rec_end
    except (CorruptRecordError, IndexError, *VARINT_ERRORS):
        return None
    return values if pos == end else None
