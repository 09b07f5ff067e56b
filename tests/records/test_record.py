"""The records section codec: Kafka's record layout, round trips and DefaultRecord's rules."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.errors import CorruptRecordError
from spark_log.records.record import (
    Record,
    decode_records,
    encode_records,
    record_values,
    scan_keys,
)
from spark_log.records.varint import write_varint

from .strategies import record_lists


def encode(records, base_offset=0, base_timestamp=0):
    out = bytearray()
    summary = encode_records(records, out, base_offset, base_timestamp)
    return bytes(out), summary


def decode(data, count, base_offset=0, base_timestamp=0, append_time=None):
    return decode_records(data, 0, len(data), count, base_offset, base_timestamp, append_time)


def raw_record(*fields: bytes) -> bytes:
    """A record from already-encoded fields, prefixed with their total length."""
    body = b"".join(fields)
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out) + body


def varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def test_layout_matches_the_kafka_record_format():
    data, _ = encode([Record(5, 1_007, b"k", None, (("h", b"v"),))], 3, 1_000)
    # length, attributes, timestamp delta 7, offset delta 2, key, null value, 1 header
    expected = raw_record(b"\x00", varint(7), varint(2), b"\x02k", b"\x01", b"\x02", b"\x02h\x02v")
    assert data == expected


@settings(max_examples=200, deadline=None)
@given(record_lists(base_offset=1_000))
def test_round_trip(records):
    base_ts = records[0].timestamp if records else 0
    data, summary = encode(records, 1_000, base_ts)
    assert decode(data, summary.count, 1_000, base_ts) == tuple(records)
    assert summary.count == len(records)
    if records:
        assert summary.last_offset_delta == records[-1].offset - 1_000
        assert summary.max_timestamp == max(r.timestamp for r in records)


@settings(max_examples=50, deadline=None)
@given(record_lists(min_size=1), st.integers(0, 1 << 40))
def test_log_append_time_replaces_every_timestamp(records, append_time):
    data, summary = encode(records, 0, records[0].timestamp)
    decoded = decode(data, summary.count, 0, records[0].timestamp, append_time)
    assert {r.timestamp for r in decoded} == {append_time}
    assert [r.offset for r in decoded] == [r.offset for r in records]


@settings(max_examples=100, deadline=None)
@given(record_lists(base_offset=50))
def test_scan_keys_yields_offsets_and_keys(records):
    data, summary = encode(records, 50, 0)
    scanned = scan_keys(data, 0, len(data), summary.count, 50)
    assert scanned == [(r.offset, r.key) for r in records]


def test_large_values_round_trip():
    big = bytes(range(256)) * 1200  # 300 KiB
    records = [Record(0, 1, b"a", big, ()), Record(1, 2, None, big[::-1], (("x", big[:70_000]),))]
    data, _ = encode(records)
    assert decode(data, 2) == tuple(records)


def test_negative_key_and_value_lengths_read_as_null_like_kafka():
    data = raw_record(b"\x00", varint(0), varint(0), varint(-5), varint(-2), varint(0))
    assert decode(data, 1) == (Record(0, 0, None, None, ()),)


def test_invalid_utf8_header_key_decodes_with_replacement_like_java():
    data = raw_record(
        b"\x00",
        varint(0),
        varint(0),
        varint(-1),
        varint(-1),
        varint(1),
        varint(2),
        b"\xff\x41",
        varint(-1),
    )
    assert decode(data, 1)[0].headers == (("\ufffdA", None),)


MALFORMED = pytest.mark.parametrize(
    ("data", "count", "reason"),
    [
        (b"", 1, "premature EOF"),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00") * 2,
            1,
            "7 bytes remain after 1 records",
        ),
        (varint(-3) + b"\x00" * 6, 1, "invalid record size -3"),
        (varint(50) + b"\x00" * 6, 1, "invalid record size 50"),
        (raw_record(b"\x00", b"\x00", b"\x00", varint(9), b"ab", b"\x01", b"\x00"), 1, "key of 9"),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", varint(9), b"ab", b"\x00"),
            1,
            "value of 9",
        ),
        (raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", varint(-1)), 1, "headers -1"),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", varint(1000), b"\x00"),
            1,
            "headers 1000, larger",
        ),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x02", varint(-1), b"\x01"),
            1,
            "negative header key size",
        ),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x02", varint(4), b"a"),
            1,
            "header key of 4",
        ),
        (
            raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00", b"\x00\x00"),
            1,
            "expected to read 8 bytes in record payload, but instead read 6",
        ),
        (raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01"), 1, "record 0 at byte 0"),
        (
            raw_record(b"\x00", b"\x00", b"\xff\xff\xff\xff\x7f", b"\x01", b"\x01", b"\x00"),
            1,
            "offset delta .* out of range",
        ),
        (raw_record(b"\x00", b"\x00", b"\x80" * 6, b"\x01", b"\x01", b"\x00"), 1, "bad varint"),
    ],
)


@MALFORMED
def test_malformed_sections_raise_with_a_reason(data, count, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        decode(data, count)


def test_errors_name_the_failing_record_and_its_position():
    good = raw_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00")
    with pytest.raises(CorruptRecordError, match=f"record 1 at byte {len(good)}: .*premature EOF"):
        decode(good, 2)


def test_scan_keys_rejects_an_overrunning_key():
    data = raw_record(b"\x00", b"\x00", b"\x00", varint(9), b"ab")
    with pytest.raises(CorruptRecordError, match="key of 9"):
        scan_keys(data, 0, len(data), 1, 0)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (Record(0, 0, "text", None), "key must be bytes"),
        (Record(0, 0, None, 5), "value must be bytes"),
        (Record(0, 0, None, None, ((b"k", None),)), "header key must be str"),
        (Record(0, 0, None, None, (("k", "v"),)), "header value must be bytes"),
        (Record(-1, 0, None, None), "does not follow"),
        (Record(1 << 31, 0, None, None), "beyond int32"),
        (Record(0, 1 << 63, None, None), "timestamp"),
        (Record(0, -2, None, None), "invalid negative timestamp -2"),
    ],
)
def test_encoding_rejects_values_the_format_cannot_hold(record, reason):
    with pytest.raises(ValueError, match=reason):
        encode([record])


def test_encoding_rejects_offsets_that_do_not_increase():
    with pytest.raises(ValueError, match="record offset 3 does not follow 3"):
        encode([Record(3, 0, None, None), Record(3, 0, None, None)])


def test_scan_keys_rejects_fields_past_the_record_end():
    data = varint(2) + b"\x00\x00" + b"\x00\x01"  # offset delta and null key lie past its end
    with pytest.raises(CorruptRecordError, match="overruns the record"):
        scan_keys(data, 0, len(data), 1, 0)


# ---- the values of a quorum batch -----------------------------------------------------------

quorum_records = st.lists(st.tuples(st.none() | st.binary(max_size=5), st.binary(max_size=300),
                                    st.integers(-(1 << 31), 1 << 31)), max_size=20)


@settings(max_examples=200, deadline=None)
@given(quorum_records)
def test_record_values_reads_the_values_of_a_quorum_batch(drawn):
    records = [Record(9 + i, (1 << 40) + delta, key, value, ())
               for i, (key, value, delta) in enumerate(drawn)]
    data, summary = encode(records, 9, 1 << 40)
    assert record_values(data, 0, len(data), summary.count) == [r.value for r in records]


@settings(max_examples=200, deadline=None)
@given(record_lists(base_offset=70))
def test_record_values_declines_records_that_are_not_a_quorum_batchs(records):
    """Gaps in the offsets, headers or null values: None, for `decode_records` to read."""
    data, summary = encode(records, 70, records[0].timestamp if records else 0)
    plain = all(r.offset == 70 + i and r.value is not None and not r.headers
                for i, r in enumerate(records))
    expected = [r.value for r in records] if plain else None
    assert record_values(data, 0, len(data), summary.count) == expected


@MALFORMED
def test_record_values_declines_every_malformed_section(data, count, reason):
    assert record_values(data, 0, len(data), count) is None
    assert record_values(data + b"\x00", 0, len(data) + 1, count) is None
