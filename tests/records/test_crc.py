"""The package's CRC-32C against published check values and an independent implementation
(the crc32c package), for whole buffers, memoryview slices and continued checksums."""

from __future__ import annotations

import crc32c as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.crc import crc32c


def test_the_published_check_values():
    # The CRC catalogue's check value, and RFC 3720's (iSCSI) test vectors B.4.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(b"") == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 64), st.integers(0, 64))
def test_a_slice_of_a_memoryview_is_checksummed_as_its_bytes(data, cut_head, cut_tail):
    view = memoryview(data)[cut_head: max(cut_head, len(data) - cut_tail)]
    assert crc32c(view) == reference.crc32c(bytes(view))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_a_checksum_continues_from_the_one_before_it(head, tail):
    assert crc32c(tail, crc32c(head)) == crc32c(head + tail) == reference.crc32c(head + tail)


def test_a_large_buffer_and_the_buffer_types_a_log_hands_it():
    data = bytes(range(256)) * 4099  # just over 1 MiB, not a multiple of any vector width
    expected = reference.crc32c(data)
    assert crc32c(data) == crc32c(bytearray(data)) == crc32c(memoryview(data)) == expected
