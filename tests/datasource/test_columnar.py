"""The vectorised batch decoder agrees with the reference decoder of `spark_log.records`, with
each of its two field walks (the native one, which the install builds, and numpy's), and the two
walks agree on every mutated records section: the same fields, or CorruptRecordError from both."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.datasource import columnar
from spark_log.datasource.columnar import decode, whole_batches_end
from spark_log.datasource.record_scan import record_starts
from spark_log.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    Record,
    TimestampType,
    build_batch,
    decode_batch,
    record_fields,
)
from spark_log.records.varint import read_varint

from ..records.test_record_batch_fuzz import apply, mutations

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=3).map(tuple)
codecs = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD,
                          Compression.SNAPPY])
ts_types = st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
WALKS = [pytest.param(columnar._native_fields, id="native"),
         pytest.param(columnar._numpy_fields, id="numpy")]


@pytest.fixture(params=WALKS)
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoder with one field walk or the other."""
    monkeypatch.setattr(columnar, "_fields", request.param)


def test_the_install_built_the_native_field_walk() -> None:
    assert record_fields.NATIVE, (
        "spark_log/records/_native_fields.c is not built: `pip install -e .` (what ./dev runs) "
        "compiles it; it needs a C compiler and Python's headers")
    assert columnar._fields is columnar._native_fields


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, list[Record]]:
    n = draw(st.integers(1, 60))
    base = draw(st.integers(0, 10**12))
    with_headers = draw(st.booleans())
    records = [Record(offset=base + i, timestamp=draw(st.integers(0, 2**41)), key=draw(blobs),
                      value=draw(blobs), headers=draw(headers) if with_headers else ())
               for i in range(n)]
    return build_batch(records, base_offset=base, compression=draw(codecs),
                       timestamp_type=draw(ts_types)), records


@st.composite
def sized_batches(draw: st.DrawFn) -> tuple[bytes, list[Record]]:
    """Big batches of mostly equal-sized records (the run path of the scan), a few of them
    different (where a run ends), offset deltas past one and two varint bytes."""
    n = draw(st.integers(30, 400))
    base = draw(st.integers(0, 10**6))
    size = draw(st.integers(0, 40))
    odd = draw(st.sets(st.integers(0, n - 1), max_size=4))
    key = draw(st.one_of(st.none(), st.binary(min_size=4, max_size=4)))
    start_ts = draw(st.integers(0, 2**41))
    records = [Record(offset=base + i, timestamp=start_ts + (i // 7) * draw(st.sampled_from(
        [0, 1, 100])), key=key, value=b"v" * (size + 3 if i in odd else size), headers=())
        for i in range(n)]
    return build_batch(records, base_offset=base, compression=draw(codecs)), records


def _check(parts: list[tuple[bytes, list[Record]]], with_headers: bool) -> None:
    buf = b"".join(b for b, _ in parts)
    columns = decode(buf, with_headers)
    expected = [r for b, _ in parts for r in decode_batch(b).records]
    assert columns.offsets.tolist() == [r.offset for r in expected]
    assert columns.timestamps.tolist() == [r.timestamp for r in expected]
    assert columns.keys.to_pylist() == [r.key for r in expected]
    assert columns.values.to_pylist() == [r.value for r in expected]
    if with_headers:
        assert [tuple(h) for h in columns.headers] == [r.headers for r in expected]


# (The walk fixture patches one module attribute for the whole test: nothing to reset.)
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


@settings(max_examples=80, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.lists(batches(), min_size=1, max_size=3), st.booleans())
def test_columns_equal_the_reference_decoder(walk: None,
                                             parts: list[tuple[bytes, list[Record]]],
                                             with_headers: bool) -> None:
    _check(parts, with_headers)


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.lists(sized_batches(), min_size=1, max_size=3))
def test_runs_of_equal_sized_records_decode_like_the_reference(
        walk: None, parts: list[tuple[bytes, list[Record]]]) -> None:
    _check(parts, False)


def test_a_partial_trailing_batch_is_left_for_the_next_fetch(walk: None) -> None:
    batch = build_batch([Record(0, 1, b"k", b"v", ())])
    assert whole_batches_end(batch + batch[:20]) == len(batch)
    assert len(decode(batch + batch[:-1], False)) == 1


def test_records_of_several_batches_come_as_one_columns(walk: None) -> None:
    first = build_batch([Record(i, 10 + i, None, b"a%d" % i, (("h", b"x"),)) for i in range(5)])
    second = build_batch([Record(5 + i, 20, b"k", None, ()) for i in range(3)], base_offset=5,
                         compression=Compression.GZIP,
                         timestamp_type=TimestampType.LOG_APPEND_TIME)
    cols = decode(first + second, True)
    assert cols.offsets.tolist() == list(range(8))
    assert cols.values.to_pylist() == [b"a0", b"a1", b"a2", b"a3", b"a4", None, None, None]
    assert cols.keys.to_pylist() == [None] * 5 + [b"k"] * 3
    assert cols.timestamp_types.tolist() == [0] * 5 + [1] * 3
    assert cols.headers == [[("h", b"x")]] * 5 + [[], [], []]


def _section(records: list[Record]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


@pytest.mark.parametrize("sizes", [[10] * 200, [10] * 100 + [300] * 3 + [10] * 100,
                                   [i % 7 for i in range(300)], [5] * 20])
def test_record_starts_are_where_the_reference_layout_puts_them(sizes: list[int]) -> None:
    records = [Record(i, 0, None, b"z" * n, ()) for i, n in enumerate(sizes)]
    data = _section(records)
    starts = record_starts(data, np.frombuffer(data, np.uint8), 0, len(data), len(records))
    expected, pos = [], 0
    for _ in records:  # the reference: one varint after the other
        expected.append(pos)
        length, pos = read_varint(data, pos)
        pos += length
    assert starts.tolist() == expected


@pytest.mark.parametrize("sizes", [[10] * 200, [i % 7 for i in range(300)]])
def test_record_lengths_that_do_not_add_up_are_corrupt(sizes: list[int]) -> None:
    data = _section([Record(i, 0, None, b"z" * n, ()) for i, n in enumerate(sizes)])
    arr = np.frombuffer(data, np.uint8)
    with pytest.raises(CorruptRecordError):
        record_starts(data, arr, 0, len(data) - 1, len(sizes))  # one byte short
    with pytest.raises(CorruptRecordError):
        record_starts(data, arr, 0, len(data), len(sizes) + 1)  # one record more than there is
    with pytest.raises(CorruptRecordError):
        record_starts(data, arr, 0, len(data), len(sizes) - 1)  # records left over


def _fields_of(walk, data: bytes, sections: list[tuple[int, int, int]]):  # type: ignore
    """The walk's fields as plain lists, or the CorruptRecordError it raised."""
    batches = [columnar._Batch(lo, hi, count, 0, 0, None) for lo, hi, count in sections]
    try:
        f = walk(data, batches)
    except CorruptRecordError as e:
        return CorruptRecordError, str(e) != ""
    return [getattr(f, name).tolist() for name in record_fields.FIELDS], f.with_headers


def _both_walks(data: bytes, sections: list[tuple[int, int, int]]):  # type: ignore
    native = _fields_of(columnar._native_fields, data, sections)
    assert native == _fields_of(columnar._numpy_fields, data, sections)
    return native


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_both_walks_agree_on_mutated_sections(data: st.DataObject) -> None:
    record = st.builds(Record, offset=st.just(0), timestamp=st.integers(0, 2**41), key=blobs,
                       value=blobs, headers=st.one_of(st.just(()), headers))
    parts = [_section([r._replace(offset=i) for i, r in enumerate(rs)]) for rs in data.draw(
        st.lists(st.lists(record, min_size=1, max_size=40), min_size=1, max_size=3))]
    sections, pos = [], 0
    for part in parts:
        sections.append((pos, pos + len(part), _count(part)))
        pos += len(part)
    buf = b"".join(parts)
    assert _both_walks(buf, sections)[0] is not CorruptRecordError
    mutated = apply(buf, data.draw(mutations(len(buf))))
    cut = data.draw(st.integers(0, len(sections) - 1))
    fitting = [(lo, min(hi, len(mutated)), c) for lo, hi, c in sections[:cut + 1]
               if lo <= len(mutated)]
    fitting = [(lo, hi, c) for lo, hi, c in fitting if c <= hi - lo]
    if fitting:
        _both_walks(mutated, fitting)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=80), st.data())
def test_both_walks_agree_on_arbitrary_bytes(data: bytes, draw: st.DataObject) -> None:
    lo = draw.draw(st.integers(0, len(data)))
    hi = draw.draw(st.integers(lo, len(data)))
    _both_walks(data, [(lo, hi, draw.draw(st.integers(0, hi - lo)))])


def _count(section: bytes) -> int:
    """How many records a well-formed section holds (the reference walk)."""
    pos, n = 0, 0
    while pos < len(section):
        length, pos = read_varint(section, pos)
        pos += length
        n += 1
    return n


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)  # zigzag, 64 bits
    raw &= (1 << 64) - 1
    out = bytearray()
    while raw >= 0x80:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _record(ts_delta: bytes, body: bytes = b"\x00" + _varint(-1) + _varint(1) + b"v" + b"\x00"
            ) -> bytes:
    """A record of one attributes byte, `ts_delta`'s bytes, then `body` (from the offset
    delta on: by default offset delta 0, a null key, value b"v", no headers)."""
    inner = b"\x00" + ts_delta + body
    return _varint(len(inner)) + inner


@pytest.mark.parametrize("delta", [2**62, -(2**63), 2**63 - 1, -1, 0])
def test_wide_timestamp_deltas_are_read_alike(delta: int) -> None:
    data = _record(_varint(delta)) * 3
    fields, with_headers = _both_walks(data, [(0, len(data), 3)])
    assert fields[0] == [delta] * 3 and fields[5] == [1] * 3 and not with_headers


@pytest.mark.parametrize("ts_delta", [
    b"\x80" * 9 + b"\x02",  # ten bytes, past 64 bits
    b"\x80" * 10 + b"\x00",  # eleven bytes
    b"\x80" * 3,  # never ends inside the record
])
def test_varints_too_long_or_past_64_bits_are_corrupt_in_both(ts_delta: bytes) -> None:
    data = _record(ts_delta)
    assert _both_walks(data, [(0, len(data), 1)]) == (CorruptRecordError, True)


@pytest.mark.parametrize("body", [
    b"\x00" + _varint(5) + b"k",  # a key longer than its record
    b"\x00" + _varint(2**62) + b"k",  # a key length no position can add
    b"\x00" + _varint(-1) + _varint(2**62) + b"v\x00",  # a value length likewise
    b"\x00" + _varint(-1) + _varint(1) + b"v" + _varint(-1),  # a negative header count
    b"\x00" + _varint(-1) + _varint(1) + b"v\x00\x00",  # a byte after a header count of 0
])
def test_fields_past_their_record_are_corrupt_in_both(body: bytes) -> None:
    data = _record(_varint(0), body)
    assert _both_walks(data, [(0, len(data), 1)]) == (CorruptRecordError, True)


def test_negative_lengths_are_nulls_and_headers_are_left_to_the_caller() -> None:
    header = _varint(1) + b"h" + _varint(-1)
    body = b"\x00" + _varint(-7) + _varint(-1) + _varint(1) + header
    data = _record(_varint(0), body)
    (_, _, key_start, key_len, value_start, value_len, headers_start, header_count, end), \
        with_headers = _both_walks(data, [(0, len(data), 1)])
    assert key_len == [-7] and value_len == [-1] and value_start == [key_start[0] + 1]
    assert header_count == [1] and with_headers and end == [len(data)]
    assert data[headers_start[0]:end[0]] == header


def test_the_native_walk_refuses_an_output_of_another_size_and_sections_past_the_buffer(
        ) -> None:
    assert record_fields.record_fields is not None
    data = _record(_varint(0)) * 2
    good = np.empty((len(record_fields.FIELDS), 2), np.int64)
    assert record_fields.record_fields(data, [(0, len(data), 2)], good) is False
    with pytest.raises(ValueError, match="out holds"):
        record_fields.record_fields(data, [(0, len(data), 2)], np.empty((9, 3), np.int64))
    for section in [(0, len(data) + 1, 2), (-1, len(data), 2), (5, 4, 0), (0, 3, 4)]:
        with pytest.raises(CorruptRecordError, match="do not fit"):
            record_fields.record_fields(data, [section], good)
