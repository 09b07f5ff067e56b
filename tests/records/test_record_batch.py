"""Whole batches: build/decode round trips, header fields as Kafka sets them, and lazy walks
over a file slice that decode only the batches asked for."""

import mmap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    TimestampType,
    read_header,
)
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record import Record
from spark_log.records.record_batch import (
    NO_TIMESTAMP,
    BatchView,
    build_batch,
    decode_batch,
    iter_batches,
)

from .strategies import compressions, record_lists, timestamp_types

RECORDS = [
    Record(10 + i, 1_000 + 3 * i, b"key-%d" % i if i % 3 else None, b"v" * i, (("h", b"%d" % i),))
    for i in range(30)
]


@settings(max_examples=150, deadline=None)
@given(
    record_lists(min_size=1, base_offset=100),
    compressions,
    timestamp_types,
    st.integers(-1, 1 << 40),  # producer id
    st.integers(-1, 32767),  # producer epoch
    st.integers(-1, (1 << 31) - 1),  # base sequence
    st.booleans(),
    st.booleans(),
    st.integers(-1, 1000),  # partition leader epoch
)
def test_round_trip_every_option(
    records, codec, ts_type, producer_id, epoch, sequence, transactional, control, leader_epoch
):
    transactional = transactional and producer_id >= 0
    append_time = max(r.timestamp for r in records) + 5
    batch = build_batch(
        records,
        base_offset=100,
        compression=codec,
        timestamp_type=ts_type,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
        is_control=control,
        partition_leader_epoch=leader_epoch,
        max_timestamp=append_time if ts_type == TimestampType.LOG_APPEND_TIME else None,
    )
    decoded = decode_batch(batch)
    header = decoded.header
    assert (header.base_offset, header.size, header.records_count) == (
        100,
        len(batch),
        len(records),
    )
    assert header.last_offset == records[-1].offset
    assert header.base_timestamp == records[0].timestamp
    assert header.compression == codec and header.timestamp_type == ts_type
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id,
        epoch,
        sequence,
    )
    assert (header.is_transactional, header.is_control) == (transactional, control)
    assert header.partition_leader_epoch == leader_epoch
    if ts_type == TimestampType.CREATE_TIME:
        assert header.max_timestamp == max(r.timestamp for r in records)
        assert decoded.records == tuple(records)
    else:
        assert header.max_timestamp == append_time
        assert decoded.records == tuple(r._replace(timestamp=append_time) for r in records)


@settings(max_examples=10, deadline=None)
@given(compressions, st.integers(100_000, 600_000), st.binary(min_size=1, max_size=64))
def test_large_records_round_trip(codec, size, seed):
    value = (seed * (size // len(seed) + 1))[:size]
    records = [Record(0, 1, b"big", value), Record(1, 2, None, value[::-1], (("h", value[:999]),))]
    assert decode_batch(build_batch(records, compression=codec)).records == tuple(records)


def test_null_and_empty_keys_values_and_headers_survive():
    records = [
        Record(0, 5, None, None),
        Record(1, 5, b"", b""),
        Record(2, 5, b"k", b"", (("", None), ("\u00e9", b""), ("", b"x"))),
    ]
    for codec in Compression:
        assert decode_batch(build_batch(records, compression=codec)).records == tuple(records)


def test_last_offset_delta_can_be_kept_past_the_last_record_for_compaction():
    kept = [Record(3, 1, b"a", b"1"), Record(7, 2, b"b", b"2")]
    header = decode_batch(build_batch(kept, base_offset=0, last_offset_delta=9)).header
    assert (header.records_count, header.last_offset, header.next_offset) == (2, 9, 10)
    with pytest.raises(ValueError, match="precedes the last record"):
        build_batch(kept, last_offset_delta=6)


def test_empty_batch_keeps_producer_state_like_kafka():
    batch = build_batch(
        [],
        base_offset=40,
        compression=Compression.ZSTD,
        producer_id=9,
        producer_epoch=2,
        base_sequence=17,
        last_offset_delta=4,
    )
    decoded = decode_batch(batch)
    header = decoded.header
    assert decoded.records == ()
    assert len(batch) == HEADER_SIZE
    assert header.compression == Compression.NONE
    assert (header.base_timestamp, header.max_timestamp) == (NO_TIMESTAMP, NO_TIMESTAMP)
    assert (header.last_offset, header.producer_id, header.base_sequence) == (44, 9, 17)


def test_batch_declaring_no_records_has_none_whatever_follows():
    # Kafka's DefaultRecordBatch returns no records for a count of 0 without reading the rest.
    batch = bytearray(build_batch(RECORDS[:2]))
    batch[57:61] = b"\x00\x00\x00\x00"
    assert decode_batch(bytes(batch), verify_crc=False).records == ()


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"is_transactional": True}, "transactional batch needs a producer id"),
        ({"producer_epoch": 1 << 15}, "out of range"),
        ({"base_sequence": 1 << 31}, "out of range"),
        ({"partition_leader_epoch": -(1 << 31) - 1}, "out of range"),
    ],
)
def test_build_rejects_values_the_header_cannot_hold(options, reason):
    with pytest.raises(ValueError, match=reason):
        build_batch(RECORDS[:1], **{"base_offset": 10, **options})


def test_crc_mismatch_raises_unless_verification_is_off():
    batch = bytearray(build_batch(RECORDS))
    batch[-1] ^= 0x01  # the last header value b"29" becomes b"28": the records still parse
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_batch(bytes(batch))
    assert decode_batch(bytes(batch), verify_crc=False).records[-1].headers == (("h", b"28"),)


def test_unknown_compression_id_raises():
    batch = bytearray(build_batch(RECORDS))
    batch[22] |= 0x07
    with pytest.raises(CorruptRecordError, match="unknown compression type id 7"):
        decode_batch(bytes(batch), verify_crc=False)


def test_decompression_limit_applies_to_batches():
    batch = build_batch([Record(0, 0, None, bytes(100_000))], compression=Compression.GZIP)
    with pytest.raises(CorruptRecordError, match="limit of 1000 bytes"):
        decode_batch(batch, max_decompressed_size=1000)


def test_decode_at_a_position():
    first, second = build_batch(RECORDS[:3]), build_batch(RECORDS[3:], base_offset=13)
    assert decode_batch(first + second, len(first)).records == tuple(RECORDS[3:])


def _write_log(tmp_path, batches):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    return path


def test_iter_batches_walks_a_memoryview_of_a_file_slice(tmp_path):
    batches = [
        build_batch(RECORDS[i : i + 5], base_offset=10 + i, compression=Compression(i // 5 % 5))
        for i in range(0, 30, 5)
    ]
    path = _write_log(tmp_path, [b"junk", *batches])
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)[4:]  # a slice, as a fetch of part of a segment would take
        walked = list(iter_batches(view))
        assert [b.header.base_offset for b in walked] == [10, 15, 20, 25, 30, 35]
        assert [b.size for b in walked] == [len(b) for b in batches]
        assert walked[2].raw.obj is mapped  # the view shares the file's memory: no copy
        assert bytes(walked[2].raw) == batches[2]
        assert walked[3].decode().records == tuple(RECORDS[15:20])
        assert list(walked[4].keys()) == [r.key for r in RECORDS[20:25]]
        del walked, view  # release the exported buffers before the mapping closes


def test_iter_batches_does_not_decode_skipped_batches():
    good = build_batch(RECORDS[:5], base_offset=10, compression=Compression.LZ4)
    broken = bytearray(build_batch(RECORDS[5:10], base_offset=15, compression=Compression.LZ4))
    broken[HEADER_SIZE:] = b"\xee" * (len(broken) - HEADER_SIZE)  # garbage records, bad CRC
    walked = list(iter_batches(bytearray(good + broken + good)))
    assert len(walked) == 3
    assert walked[2].decode().records == tuple(RECORDS[:5])
    with pytest.raises(CorruptRecordError):
        walked[1].decode()


def test_iter_batches_stops_at_a_torn_tail():
    batch = build_batch(RECORDS[:3])
    walker = iter_batches(batch + batch[:-1])
    assert next(walker).header.records_count == 3
    with pytest.raises(CorruptRecordError, match=f"batch at byte {len(batch)}"):
        next(walker)


def test_iter_batches_honours_start_and_end():
    a, b, c = (build_batch(RECORDS[i : i + 1], base_offset=10 + i) for i in range(3))
    buf = a + b + c
    walked = list(iter_batches(buf, len(a), len(a) + len(b)))
    assert [v.header.base_offset for v in walked] == [11]


@pytest.mark.parametrize("codec", list(Compression))
def test_offsets_and_keys_for_every_codec(codec):
    view = BatchView(build_batch(RECORDS, base_offset=10, compression=codec))
    assert list(view.offsets_and_keys()) == [(r.offset, r.key) for r in RECORDS]
    assert list(view.keys()) == [r.key for r in RECORDS]


def test_batch_view_checks_the_crc_before_scanning_keys():
    batch = bytearray(build_batch(RECORDS))
    batch[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(BatchView(batch).keys())
    assert len(list(BatchView(batch).keys(verify_crc=False))) == len(RECORDS)


def test_header_length_counts_everything_after_the_length_field():
    batch = build_batch(RECORDS, compression=Compression.SNAPPY)
    assert read_header(batch).batch_length == len(batch) - LOG_OVERHEAD
