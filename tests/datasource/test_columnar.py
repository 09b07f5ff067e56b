"""The vectorised batch decoder agrees with the reference decoder of `spark_log.records`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
)
from spark_log.records.varint import read_varint

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=3).map(tuple)
codecs = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD,
                          Compression.SNAPPY])
ts_types = st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])


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


@settings(max_examples=80, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3), st.booleans())
def test_columns_equal_the_reference_decoder(parts: list[tuple[bytes, list[Record]]],
                                             with_headers: bool) -> None:
    _check(parts, with_headers)


@settings(max_examples=60, deadline=None)
@given(st.lists(sized_batches(), min_size=1, max_size=3))
def test_runs_of_equal_sized_records_decode_like_the_reference(
        parts: list[tuple[bytes, list[Record]]]) -> None:
    _check(parts, False)


def test_a_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    batch = build_batch([Record(0, 1, b"k", b"v", ())])
    assert whole_batches_end(batch + batch[:20]) == len(batch)
    assert len(decode(batch + batch[:-1], False)) == 1


def test_records_of_several_batches_come_as_one_columns() -> None:
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
