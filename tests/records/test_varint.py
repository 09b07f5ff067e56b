"""Zigzag varints: round trips, Kafka's byte layout, and rejection of malformed encodings."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_log.records.errors import CorruptRecordError
from spark_log.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    ZIGZAG_BYTE,
    read_varint,
    read_varlong,
    varint_size,
    write_varint,
)


def encoded(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_layout_matches_kafka_zigzag(value, wire):
    assert encoded(value) == wire
    assert read_varint(wire, 0) == (value, len(wire))


@given(st.integers(INT32_MIN, INT32_MAX), st.binary(max_size=3))
def test_varint_round_trip_at_offset(value, prefix):
    wire = prefix + encoded(value) + b"\xff"
    assert read_varint(wire, len(prefix)) == (value, len(wire) - 1)
    assert varint_size(value) == len(wire) - len(prefix) - 1


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value):
    wire = encoded(value)
    assert read_varlong(wire, 0) == (value, len(wire))
    assert len(wire) <= 10


def test_one_byte_table_matches_the_reader():
    assert tuple(read_varint(bytes([b]), 0)[0] for b in range(0x80)) == ZIGZAG_BYTE


@pytest.mark.parametrize(
    ("reader", "wire", "reason"),
    [
        (read_varint, b"", "bad varint"),
        (read_varint, b"\x80\x80", "bad varint"),  # continuation bit, then the end
        (read_varint, b"\xff\xff\xff\xff\xff\x01", "bad varint"),  # 6 bytes
        (read_varint, b"\xff\xff\xff\xff\x7f", "out of range"),  # 35 bits
        (read_varlong, b"\xff" * 10 + b"\x01", "bad varlong"),  # 11 bytes
    ],
)
def test_malformed_varints_raise_corrupt_record_error(reader, wire, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        reader(wire, 0)


def test_varlong_drops_bits_past_64_as_java_does():
    assert read_varlong(b"\xff" * 9 + b"\x7f", 0) == read_varlong(b"\xff" * 9 + b"\x01", 0)
