"""Record batches -> Arrow columns, vectorised: the fast read path's decoder.

A v2 records section is a run of variable-length records whose field widths are varints, so
only the record boundaries need a sequential scan (one short Python loop over length prefixes);
every field after that is decoded for all records at once with numpy (varints of all records in
at most ten vector steps), and keys and values are joined into Arrow binary buffers with one
memcpy per record (cheaper than a numpy byte gather for values over a few bytes). Headers,
rare in practice, are decoded per record. Control batches are skipped; compressed batches are
decompressed by `spark_log.records`. Malformed input raises `CorruptRecordError`, which makes
the caller fall back to the full client.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_log.records import CorruptRecordError, iter_batches, peek_size
from spark_log.records.batch_header import TIMESTAMP_TYPE_BIT

CONTROL_BIT = 0x20
_MAX_VARINT_BYTES = 10


@dataclass
class Columns:
    """Decoded records of one partition, in offset order; all arrays have the same length."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64 ms
    timestamp_types: np.ndarray  # int32, Kafka ids (0 create, 1 log append)
    keys: pa.Array
    values: pa.Array
    headers: list[list[tuple[str, bytes | None]]] | None

    def __len__(self) -> int:
        return len(self.offsets)


def concat(pieces: list[tuple[Columns, int, int]]) -> Columns:
    """Rows lo..hi of each piece, as one Columns (one Arrow batch per fetch, not per Kafka
    batch: small producer batches would otherwise cost Spark one Arrow batch each)."""
    if len(pieces) == 1:
        cols, lo, hi = pieces[0]
        if lo == 0 and hi == len(cols):
            return cols
    headers = None
    if pieces[0][0].headers is not None:
        headers = [h for cols, lo, hi in pieces for h in cols.headers[lo:hi]]
    return Columns(
        np.concatenate([c.offsets[lo:hi] for c, lo, hi in pieces]),
        np.concatenate([c.timestamps[lo:hi] for c, lo, hi in pieces]),
        np.concatenate([c.timestamp_types[lo:hi] for c, lo, hi in pieces]),
        pa.concat_arrays([c.keys.slice(lo, hi - lo) for c, lo, hi in pieces]),
        pa.concat_arrays([c.values.slice(lo, hi - lo) for c, lo, hi in pieces]),
        headers)


def whole_batches_end(buf: bytes) -> int:
    """Bytes of `buf` taken by whole batches (a fetch may end with a partial one)."""
    pos = 0
    while pos + 12 <= len(buf):
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            break
        pos += size
    return pos


def decode(buf: bytes, with_headers: bool) -> list[Columns]:
    """Columns of every data batch in `buf` (whole batches only)."""
    return decode_with_next(buf, with_headers)[0]


def decode_with_next(buf: bytes, with_headers: bool) -> tuple[list[Columns], int | None]:
    """Columns of every data batch in `buf`, and the offset after the last whole batch (control
    batches included), None when `buf` holds no whole batch."""
    out = []
    next_offset = None
    for view in iter_batches(buf, 0, whole_batches_end(buf)):
        h = view.header
        next_offset = h.next_offset
        if h.attributes & CONTROL_BIT or h.records_count == 0:
            continue
        view.verify_crc()
        data = view.records_section()
        append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        out.append(decode_records(data, h.records_count, h.base_offset, h.base_timestamp,
                                  append_time, with_headers))
    return out, next_offset


def _record_starts(data: bytes, count: int) -> tuple[list[int], list[int]]:
    """Start (after the length prefix) and length of each record: the sequential part, kept to
    a few bytecodes per record (bounds are checked once, after the loop)."""
    starts: list[int] = []
    lengths: list[int] = []
    add_start, add_length = starts.append, lengths.append
    pos = 0
    try:
        for _ in range(count):
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
            add_start(pos)
            add_length(length)
            pos += length
    except IndexError:
        raise CorruptRecordError("records section ends before its record count") from None
    if pos != len(data) or (lengths and min(lengths) < 0):
        raise CorruptRecordError("record lengths do not add up to the records section")
    return starts, lengths


def _long_varint(data: bytes, pos: int) -> tuple[int, int]:
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


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at every position of `pos`: (values int64, widths)."""
    raw = np.zeros(len(pos), np.uint64)
    width = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    last = len(arr) - 1
    for k in range(_MAX_VARINT_BYTES):
        byte = arr[np.minimum(pos + k, last)].astype(np.uint64)
        raw |= np.where(active, (byte & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        width += active
        active &= byte >= 0x80
        if not active.any():
            break
    else:
        raise CorruptRecordError("varint longer than ten bytes")
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, width


def _gather(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of data[starts[i]:starts[i]+lengths[i]]; negative length means null."""
    n = len(starts)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1]:
        begin = starts.tolist()
        end = (starts + sizes).tolist()
        joined = b"".join(map(data.__getitem__, map(slice, begin, end)))
    else:
        joined = b""  # all null or empty (keyless records)
    nulls = int(n - valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets),
                                                 pa.py_buffer(joined)], null_count=nulls)


def decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                   append_time: int | None, with_headers: bool) -> Columns:
    arr = np.frombuffer(data, np.uint8)
    starts_l, lengths_l = _record_starts(data, count)
    starts = np.array(starts_l, np.int64)
    ends = starts + np.array(lengths_l, np.int64)
    pos = starts + 1  # attributes
    ts_delta, w = _varints(arr, pos)
    pos = pos + w
    off_delta, w = _varints(arr, pos)
    pos = pos + w
    key_len, w = _varints(arr, pos)
    key_start = pos + w
    pos = key_start + np.maximum(key_len, 0)
    value_len, w = _varints(arr, pos)
    value_start = pos + w
    pos = value_start + np.maximum(value_len, 0)
    header_count, w = _varints(arr, pos)
    pos = pos + w
    if (pos > ends).any() or (header_count < 0).any():
        raise CorruptRecordError("record fields run past the record")
    with_any = header_count != 0
    if (pos[~with_any] != ends[~with_any]).any():
        raise CorruptRecordError("record does not end where its length says")
    headers = None
    if with_headers or with_any.any():
        headers = _headers(data, pos, ends, header_count) if with_any.any() else [[]] * count
    if append_time is not None:
        stamps = np.full(count, append_time, np.int64)
        types = np.ones(count, np.int32)
    else:
        stamps = base_timestamp + ts_delta
        types = np.zeros(count, np.int32)
    return Columns(base_offset + off_delta, stamps, types,
                   _gather(data, key_start, key_len), _gather(data, value_start, value_len),
                   headers if with_headers else None)


def _headers(data: bytes, pos: np.ndarray, ends: np.ndarray, counts: np.ndarray
             ) -> list[list[tuple[str, bytes | None]]]:
    from spark_log.records.varint import read_varint

    result: list[list[tuple[str, bytes | None]]] = []
    for p, end, n in zip(pos.tolist(), ends.tolist(), counts.tolist(), strict=True):
        items = []
        for _ in range(n):
            klen, p = read_varint(data, p)
            if klen < 0 or p + klen > end:
                raise CorruptRecordError("bad header key")
            key = data[p:p + klen].decode("utf-8", "replace")
            p += klen
            vlen, p = read_varint(data, p)
            value = None if vlen < 0 else data[p:p + vlen]
            p += max(vlen, 0)
            items.append((key, value))
        if p != end:
            raise CorruptRecordError("headers do not end where the record does")
        result.append(items)
    return result
