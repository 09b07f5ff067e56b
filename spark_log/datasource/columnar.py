"""Record batches -> Arrow columns, vectorised: the fast read path's decoder.

A whole Fetch response is decoded at once, into one `Columns`. A v2 records section is a run of
variable-length records whose field widths are varints. Where each field of each record lies
comes from one native pass over all batches (`spark_log.records.record_fields`), or, without
the extension, from numpy: the record boundaries by a sequential step (`record_scan`), then
every field of all records at once (varints in at most ten vector steps). Offsets and
timestamps are then vector sums, and keys and values are cut out of the response buffer by
Arrow's filter kernel (no Python object per record). Headers, rare in practice, are decoded per
record. Control batches are skipped; compressed batches are
decompressed by `spark_log.records`. Malformed input raises `CorruptRecordError`, which makes
the caller fall back to the full client.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_log.records import HEADER_SIZE, CorruptRecordError, iter_batches, peek_size
from spark_log.records.batch_header import COMPRESSION_MASK, CONTROL_BIT, TIMESTAMP_TYPE_BIT
from spark_log.records.record_fields import FIELDS, NATIVE, record_fields

from .record_scan import record_starts

Buffer = bytes | memoryview  # the records of a fetch: a view of the response frame
_MAX_VARINT_BYTES = 10
_INT32_LIMIT = 2**31 - 1


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


@dataclass
class _Batch:
    """A data batch's records section: data[lo:hi] of the buffer being decoded."""

    lo: int
    hi: int
    count: int
    base_offset: int
    base_timestamp: int
    append_time: int | None
    decompressed: bytes | None = None


def whole_batches_end(buf: Buffer) -> int:
    """Bytes of `buf` taken by whole batches (a fetch may end with a partial one)."""
    pos = 0
    while pos + 12 <= len(buf):
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            break
        pos += size
    return pos


def decode(buf: Buffer, with_headers: bool) -> Columns:
    """Columns of every data batch in `buf` (whole batches only)."""
    return decode_with_next(buf, with_headers)[0]


def decode_with_next(buf: Buffer, with_headers: bool) -> tuple[Columns, int | None]:
    """Columns of every data batch in `buf`, and the offset after the last whole batch (control
    batches included), None when `buf` holds no whole batch. The columns copy what they keep:
    `buf` may be reused afterwards."""
    batches: list[_Batch] = []
    next_offset = None
    for view in iter_batches(buf, 0, whole_batches_end(buf)):
        h = view.header
        next_offset = h.next_offset
        if h.attributes & CONTROL_BIT or h.records_count == 0:
            continue
        view.verify_crc()
        append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        start = view.position + HEADER_SIZE
        batch = _Batch(start, view.position + h.size, h.records_count, h.base_offset,
                       h.base_timestamp, append_time)
        if h.attributes & COMPRESSION_MASK:
            batch.decompressed = view.records_section()
        batches.append(batch)
    data = _contiguous(buf, batches)
    return _decode_records(data, batches, with_headers), next_offset


def _contiguous(buf: Buffer, batches: list[_Batch]) -> Buffer:
    """One buffer holding every records section: `buf` itself unless some were compressed
    (then the sections are joined, and each batch's lo/hi moved to its place there)."""
    if not any(b.decompressed is not None for b in batches):
        return buf
    view = memoryview(buf)
    parts, pos = [], 0
    for b in batches:
        part = b.decompressed if b.decompressed is not None else view[b.lo:b.hi]
        parts.append(part)
        b.lo, b.hi = pos, pos + len(part)
        pos = b.hi
    return b"".join(parts)


def _empty(with_headers: bool) -> Columns:
    none = np.zeros(0, np.int64)
    return Columns(none, none, np.zeros(0, np.int32), pa.nulls(0, pa.binary()),
                   pa.nulls(0, pa.binary()), [] if with_headers else None)


@dataclass
class _Fields:
    """Per record of the batches being decoded, int64 arrays (positions index the buffer): the
    `record_fields.FIELDS`, in that order; `with_headers`, whether any record has headers."""

    ts_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    headers_start: np.ndarray
    header_count: np.ndarray
    record_end: np.ndarray
    with_headers: bool


def _decode_records(data: Buffer, batches: list[_Batch], with_headers: bool) -> Columns:
    if not batches:
        return _empty(with_headers)
    f = _fields(data, batches)
    counts = np.array([b.count for b in batches], np.int64)
    headers = None
    if with_headers or f.with_headers:
        headers = (_headers(data, f.headers_start, f.record_end, f.header_count)
                   if f.with_headers else [[]] * len(f.key_start))
    offsets = np.repeat(np.array([b.base_offset for b in batches], np.int64), counts) \
        + f.offset_delta
    append = np.array([b.append_time is not None for b in batches])
    if append.all():
        stamps = np.repeat(np.array([b.append_time for b in batches], np.int64), counts)
    else:
        base = np.array([b.append_time if b.append_time is not None else b.base_timestamp
                         for b in batches], np.int64)
        stamps = np.repeat(base, counts) + np.where(np.repeat(append, counts), 0, f.ts_delta)
    types = np.repeat(append.astype(np.int32), counts)
    return Columns(offsets, stamps, types, _gather(data, f.key_start, f.key_len),
                   _gather(data, f.value_start, f.value_len), headers if with_headers else None)


def _native_fields(data: Buffer, batches: list[_Batch]) -> _Fields:
    """The fields in one pass of `spark_log.records.record_fields` (C)."""
    assert record_fields is not None
    # numpy allocates the columns: megabytes of them come in huge pages.
    f = np.empty((len(FIELDS), sum(b.count for b in batches)), np.int64)
    any_headers = record_fields(data, [(b.lo, b.hi, b.count) for b in batches], f)
    return _Fields(*f, with_headers=any_headers)


def _numpy_fields(data: Buffer, batches: list[_Batch]) -> _Fields:
    """The fields with numpy: the record boundaries by `record_scan`, then each varint field of
    every record at once. Defines what `_native_fields` must return."""
    arr = np.frombuffer(data, np.uint8)
    starts = np.concatenate([record_starts(data, arr, b.lo, b.hi, b.count) for b in batches])
    length, w = _varints(arr, starts)
    begin = starts + w
    ends = begin + length
    pos = begin + 1  # attributes
    ts_delta, w = _varints(arr, pos)
    pos = pos + w
    off_delta, w = _varints(arr, pos)
    pos = pos + w
    key_len, w = _varints(arr, pos)
    key_start = pos + w
    # (A length past its record is corrupt: checked here, before any sum can wrap.)
    if (key_len > length).any():
        raise CorruptRecordError("record fields run past the record")
    pos = key_start + np.maximum(key_len, 0)
    value_len, w = _varints(arr, pos)
    value_start = pos + w
    if (value_len > length).any():
        raise CorruptRecordError("record fields run past the record")
    pos = value_start + np.maximum(value_len, 0)
    header_count, w = _varints(arr, pos)
    pos = pos + w
    if (pos > ends).any() or (header_count < 0).any():
        raise CorruptRecordError("record fields run past the record")
    with_any = header_count != 0
    if (pos[~with_any] != ends[~with_any]).any():
        raise CorruptRecordError("record does not end where its length says")
    return _Fields(ts_delta, off_delta, key_start, key_len, value_start, value_len, pos,
                   header_count, ends, bool(with_any.any()))


_fields = _native_fields if NATIVE else _numpy_fields


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at every position of `pos`: (values int64, widths).

    Up to eight bytes (56 bits: every length and offset delta) in int64 arithmetic, one vector
    step per byte of the widest; wider ones (huge timestamp deltas) take the uint64 path."""
    if not len(pos):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    last = len(arr) - 1
    clip = int(pos.max()) + _MAX_VARINT_BYTES > len(arr)  # near the end: stay in bounds
    byte = arr[np.minimum(pos, last) if clip else pos]
    more = byte >= 0x80
    raw = (byte & 0x7F).astype(np.int64)
    width = np.ones(len(pos), np.int64)
    for k in range(1, 8):
        if not more.any():
            return (raw >> 1) ^ -(raw & 1), width
        at = pos + k
        byte = arr[np.minimum(at, last) if clip else at]
        raw |= np.where(more, (byte & 0x7F).astype(np.int64) << (7 * k), 0)
        width += more
        more &= byte >= 0x80
    if not more.any():
        return (raw >> 1) ^ -(raw & 1), width
    return _wide_varints(arr, pos)


def _wide_varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    last = len(arr) - 1
    raw = np.zeros(len(pos), np.uint64)
    width = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    for k in range(_MAX_VARINT_BYTES):
        wide = arr[np.minimum(pos + k, last)].astype(np.uint64)
        if k == _MAX_VARINT_BYTES - 1 and (active & (wide > 1)).any():  # (the last ends it)
            raise CorruptRecordError("varint longer than ten bytes or past 64 bits")
        raw |= np.where(active, (wide & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        width += active
        active &= wide >= 0x80
        if not active.any():
            break
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, width


def _gather(data: Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of data[starts[i]:starts[i]+lengths[i]]; negative length means null.

    The spans are laid out as every other element of one binary array over `data` (the gaps
    between them the others; starts ascend), and Arrow's filter copies out the even ones."""
    n = len(starts)
    valid = lengths >= 0
    nulls = int(n - valid.sum())
    if nulls == n:
        return pa.nulls(n, pa.binary())
    ends = starts + np.where(valid, lengths, 0)
    large = int(ends[-1]) > _INT32_LIMIT
    bounds = np.empty(2 * n + 1, np.int64 if large else np.int32)
    bounds[0:2 * n:2] = starts
    bounds[1:2 * n:2] = ends
    bounds[2 * n] = ends[-1]
    spans = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n,
                                  [None, pa.py_buffer(bounds), pa.py_buffer(data)])
    every_other = np.zeros(2 * n, bool)
    every_other[0::2] = True
    out = spans.filter(pa.array(every_other))
    if large:
        out = out.cast(pa.binary())
    if not nulls:
        return out
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, *out.buffers()[1:]], null_count=nulls)


def _headers(data: Buffer, pos: np.ndarray, ends: np.ndarray, counts: np.ndarray
             ) -> list[list[tuple[str, bytes | None]]]:
    from spark_log.records.varint import read_varint

    result: list[list[tuple[str, bytes | None]]] = []
    for p, end, n in zip(pos.tolist(), ends.tolist(), counts.tolist(), strict=True):
        items = []
        for _ in range(n):
            klen, p = read_varint(data, p)
            if klen < 0 or p + klen > end:
                raise CorruptRecordError("bad header key")
            key = bytes(data[p:p + klen]).decode("utf-8", "replace")
            p += klen
            vlen, p = read_varint(data, p)
            value = None if vlen < 0 else bytes(data[p:p + vlen])
            p += max(vlen, 0)
            items.append((key, value))
        if p != end:
            raise CorruptRecordError("headers do not end where the record does")
        result.append(items)
    return result
