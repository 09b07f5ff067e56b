"""Primitive readers/writers: varints, compact lengths, tag sections, bounds checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial.readers import read_unsigned_varint

from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.wire import (
    INT32,
    read_compact_length,
    read_int32,
    read_uvarint,
    skip_tag_section,
    uvarint,
)


def view(data: bytes) -> memoryview:
    return memoryview(data)


@given(st.integers(0, 2**32 - 1), st.binary(max_size=4))
def test_uvarint_round_trips_and_matches_kio(value, tail):
    encoded = uvarint(value)
    data = encoded + tail
    assert read_uvarint(view(data), 0, len(data), "v") == (value, len(encoded))
    assert read_unsigned_varint(encoded, 0) == (value, len(encoded))


def test_uvarint_refuses_negative():
    with pytest.raises(ValueError, match="cannot hold -1"):
        uvarint(-1)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
        (b"\x80\x80\x80\x80\x10", "exceeds 32 bits"),
        (b"\x80\x80", "truncated"),
        (b"", "truncated"),
    ],
)
def test_bad_varints_raise(data, reason):
    with pytest.raises(ProtocolError, match=reason):
        read_uvarint(view(data), 0, len(data), "count")


def test_compact_length_zero_means_null():
    assert read_compact_length(view(b"\x00"), 0, 1, "n") == (-1, 1)
    assert read_compact_length(view(b"\x04"), 0, 1, "n") == (3, 1)


def test_fixed_reads_respect_the_end_not_the_buffer_length():
    data = INT32.pack(7) + INT32.pack(8)
    assert read_int32(view(data), 4, 8, "x") == (8, 8)
    with pytest.raises(ProtocolError, match="truncated x"):
        read_int32(view(data), 4, 6, "x")


def test_tag_section_is_skipped_whole():
    data = b"\x02\x00\x01a\x05\x03abc" + b"next"
    assert skip_tag_section(view(data), 0, len(data), "t") == len(data) - 4


def test_tag_section_with_oversized_value_raises():
    data = b"\x01\x00\x09ab"
    with pytest.raises(ProtocolError, match="tagged field"):
        skip_tag_section(view(data), 0, len(data), "t")
