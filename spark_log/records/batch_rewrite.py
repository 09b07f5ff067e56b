"""Rewriting one v2 batch with only some of its records: what log compaction writes (the
builder half of Kafka's MemoryRecords.filterTo).

`scan_record_spans` walks a batch's (decompressed) records section once and reports, per
record, its offset, key, whether it has a value, its timestamp delta and where its bytes lie;
values and headers are skipped, not decoded. `rebuild_batch` then assembles a new batch from
the spans kept, copying each kept record's bytes as they are: the base offset and, unless a
delete horizon is being set, the base timestamp stay the batch's own, so every offset and
timestamp delta stays valid. The batch's last offset delta is kept too (Kafka's
`overrideLastOffset`), so a producer's last sequence survives compaction.

Delete horizon (KIP-534): when the attribute bit 0x40 is set, the base timestamp field holds the
time after which the batch's tombstones may be removed, and each record's timestamp delta is
relative to it. Setting a horizon therefore rewrites each kept record's timestamp delta (and
its length prefix); record timestamps read back unchanged.

`empty_batch` is the header-only batch compaction keeps when every record of a batch carrying
producer state was removed (Kafka's writeEmptyHeader). Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kio.serial.readers import read_signed_varint, read_signed_varlong

from .batch_header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Compression,
    write_crc,
)
from .compression import compress
from .errors import CorruptRecordError
from .record import NO_TIMESTAMP
from .varint import VARINT_ERRORS, ZIGZAG_BYTE, write_varint


class RecordSpan(NamedTuple):
    """One record of a records section: absolute offset, timestamp delta, key (None when
    null), whether its value is non-null, and its bytes section[start:end] (length prefix
    included)."""

    offset: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool
    start: int
    end: int


def scan_record_spans(section: bytes, count: int, base_offset: int) -> list[RecordSpan]:
    """The spans of the `count` records filling `section`; CorruptRecordError if they do not
    fill it exactly or a field overruns its record."""
    zz, rv, rl, new = ZIGZAG_BYTE, read_signed_varint, read_signed_varlong, tuple.__new__
    spans: list[RecordSpan] = []
    append = spans.append
    pos, end = 0, len(section)
    try:
        for _ in range(count):
            start = pos
            b = section[pos]
            if b < 0x80:
                length, pos = zz[b], pos + 1
            else:
                length, size = rv(section, pos)
                pos += size
            if length < 0 or length > end - pos:
                raise CorruptRecordError(f"invalid record size {length} at byte {start}")
            rec_end = pos + length
            pos += 1  # attributes
            b = section[pos]
            if b < 0x80:
                ts_delta, pos = zz[b], pos + 1
            else:
                ts_delta, size = rl(section, pos)
                pos += size
            b = section[pos]
            if b < 0x80:
                offset_delta, pos = zz[b], pos + 1
            else:
                offset_delta, size = rv(section, pos)
                pos += size
            b = section[pos]
            if b < 0x80:
                n, pos = zz[b], pos + 1
            else:
                n, size = rv(section, pos)
                pos += size
            key = None
            if n >= 0:
                key, pos = section[pos : pos + n], pos + n
            if pos >= rec_end:
                raise CorruptRecordError(f"record at byte {start} overruns its length")
            b = section[pos]
            value_len = zz[b] if b < 0x80 else rv(section, pos)[0]
            append(new(RecordSpan, (base_offset + offset_delta, ts_delta, key, value_len >= 0,
                                    start, rec_end)))
            pos = rec_end
    except VARINT_ERRORS as exc:
        raise CorruptRecordError(f"record {len(spans)}: bad varint: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes remain after {count} records")
    return spans


def rebuild_batch(header: BatchHeader, section: bytes, kept: Sequence[RecordSpan], *,
                  delete_horizon_ms: int | None = None) -> bytes:
    """A batch like the one `header` describes holding only the `kept` records of its
    `section` (in order). `delete_horizon_ms` sets a delete horizon on a batch without one;
    a batch that has one keeps it. The codec, producer fields, leader epoch, base offset and
    last offset delta are kept; the max timestamp is recomputed from the kept records unless
    the batch is LOG_APPEND_TIME, as Kafka's builder does."""
    attributes = header.attributes
    base_ts = header.base_timestamp
    view = memoryview(section)
    if delete_horizon_ms is not None and not attributes & DELETE_HORIZON_BIT:
        body = _rebased(view, kept, base_ts, delete_horizon_ms)
        attributes |= DELETE_HORIZON_BIT
        new_base_ts = delete_horizon_ms
    else:
        body = b"".join([view[s.start : s.end] for s in kept])
        new_base_ts = base_ts
    if attributes & TIMESTAMP_TYPE_BIT:
        max_ts = header.max_timestamp
    else:
        max_ts = max((base_ts + s.timestamp_delta for s in kept), default=NO_TIMESTAMP)
    codec = attributes & COMPRESSION_MASK
    if codec != Compression.NONE and kept:
        body = compress(Compression(codec), body)
    return _assemble(header, attributes, new_base_ts, max_ts, len(kept), body)


def empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch that keeps `header`'s offsets span, producer id, epoch, base
    sequence, leader epoch, timestamp type, transactional and control flags, and max
    timestamp; no records, no compression, no delete horizon."""
    keep = TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT
    return _assemble(header, header.attributes & keep, NO_TIMESTAMP, header.max_timestamp, 0,
                     b"")


def _rebased(view: memoryview, kept: Sequence[RecordSpan], old_base: int, new_base: int
             ) -> bytes:
    """The kept records with timestamp deltas moved from `old_base` to `new_base`."""
    out = bytearray()
    rv, rl = read_signed_varint, read_signed_varlong
    shift = old_base - new_base
    for span in kept:
        _, size = rv(view, span.start)
        body = span.start + size
        _, ts_size = rl(view, body + 1)
        rest = view[body + 1 + ts_size : span.end]
        record = bytearray(view[body : body + 1])  # attributes
        write_varint(record, span.timestamp_delta + shift)
        record += rest
        write_varint(out, len(record))
        out += record
    return bytes(out)


def _assemble(header: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int,
              body: bytes | bytearray) -> bytes:
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
        header.partition_leader_epoch, MAGIC, 0, attributes, header.last_offset_delta,
        base_ts, max_ts, header.producer_id if header.producer_id >= 0 else NO_PRODUCER_ID,
        header.producer_epoch, header.base_sequence, count)
    out += body
    write_crc(out, 0, len(out))
    return bytes(out)
