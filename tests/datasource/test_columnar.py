"""The vectorised batch decoder agrees with the reference decoder of `spark_log.records`."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.datasource.columnar import decode, whole_batches_end
from spark_log.records import Compression, Record, TimestampType, build_batch, decode_batch

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=3).map(tuple)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, list[Record]]:
    n = draw(st.integers(1, 60))
    base = draw(st.integers(0, 10**12))
    with_headers = draw(st.booleans())
    records = [Record(offset=base + i, timestamp=draw(st.integers(0, 2**41)), key=draw(blobs),
                      value=draw(blobs), headers=draw(headers) if with_headers else ())
               for i in range(n)]
    codec = draw(st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4,
                                  Compression.ZSTD, Compression.SNAPPY]))
    ts_type = draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]))
    return build_batch(records, base_offset=base, compression=codec, timestamp_type=ts_type), \
        records


@settings(max_examples=80, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3), st.booleans())
def test_columns_equal_the_reference_decoder(parts: list[tuple[bytes, list[Record]]],
                                             with_headers: bool) -> None:
    buf = b"".join(b for b, _ in parts)
    columns = decode(buf, with_headers)
    expected = [r for b, _ in parts for r in decode_batch(b).records]
    got_offsets = [o for c in columns for o in c.offsets.tolist()]
    assert got_offsets == [r.offset for r in expected]
    assert [t for c in columns for t in c.timestamps.tolist()] == [r.timestamp for r in expected]
    assert [k for c in columns for k in c.keys.to_pylist()] == [r.key for r in expected]
    assert [v for c in columns for v in c.values.to_pylist()] == [r.value for r in expected]
    if with_headers:
        got_headers = [tuple(h) for c in columns for h in c.headers]
        assert got_headers == [r.headers for r in expected]


def test_a_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    batch = build_batch([Record(0, 1, b"k", b"v", ())])
    assert whole_batches_end(batch + batch[:20]) == len(batch)
    assert len(decode(batch + batch[:-1], False)) == 1


def test_concat_joins_slices_of_several_batches() -> None:
    from spark_log.datasource.columnar import concat

    first = build_batch([Record(i, 10 + i, None, b"a%d" % i, (("h", b"x"),)) for i in range(5)])
    second = build_batch([Record(5 + i, 20, b"k", None, ()) for i in range(3)], base_offset=5)
    a, b = decode(first + second, True)
    merged = concat([(a, 2, 5), (b, 0, 2)])
    assert merged.offsets.tolist() == [2, 3, 4, 5, 6]
    assert merged.values.to_pylist() == [b"a2", b"a3", b"a4", None, None]
    assert merged.keys.to_pylist() == [None, None, None, b"k", b"k"]
    assert merged.headers == [[("h", b"x")]] * 3 + [[], []]
