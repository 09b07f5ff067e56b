"""FrameDecoder: whole frames out of any chunking, hostile size prefixes refused up front."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.protocol.errors import FrameError
from spark_log.protocol.framing import FrameDecoder, size_prefix

MAX = 1 << 20


def stream(*bodies: bytes) -> bytes:
    return b"".join(size_prefix(len(body)) + body for body in bodies)


def feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    return [bytes(frame) for chunk in chunks for frame in decoder.feed(chunk)]


def test_size_prefix_is_big_endian_int32():
    assert size_prefix(258) == b"\x00\x00\x01\x02"


def test_one_whole_frame_is_returned_without_prefix_and_without_copy():
    data = stream(b"hello")
    [frame] = FrameDecoder(MAX).feed(data)
    assert bytes(frame) == b"hello"
    assert frame.obj is data  # a view into the caller's bytes


def test_many_frames_in_one_feed_come_out_in_order():
    bodies = [bytes([n]) * (n + 1) for n in range(50)]
    assert feed_all(FrameDecoder(MAX), [stream(*bodies)]) == bodies


def test_split_at_every_byte_gives_the_same_frames():
    bodies = [b"first", b"x", b"third-frame" * 3]
    data = stream(*bodies)
    for cut in range(len(data) + 1):
        decoder = FrameDecoder(MAX)
        assert feed_all(decoder, [data[:cut], data[cut:]]) == bodies, cut
        assert decoder.buffered_bytes == 0


def test_byte_by_byte_feeding_reassembles_every_frame():
    bodies = [b"abc", b"defgh"]
    data = stream(*bodies)
    decoder = FrameDecoder(MAX)
    assert feed_all(decoder, [data[i : i + 1] for i in range(len(data))]) == bodies


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
)
def test_any_chunking_yields_the_frames_in_order(bodies, cuts):
    data = stream(*bodies)
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    decoder = FrameDecoder(MAX)
    assert feed_all(decoder, chunks) == bodies
    assert decoder.buffered_bytes == 0


def test_partial_frame_is_counted_as_buffered():
    decoder = FrameDecoder(MAX)
    assert decoder.feed(size_prefix(10) + b"abc") == []
    assert decoder.buffered_bytes == 3
    assert decoder.feed(b"ab") == []
    assert decoder.buffered_bytes == 5


def test_writable_input_is_copied_so_reusing_the_buffer_is_safe():
    buffer = bytearray(stream(b"keep"))
    [frame] = FrameDecoder(MAX).feed(buffer)
    buffer[4:8] = b"XXXX"
    assert bytes(frame) == b"keep"


@pytest.mark.parametrize("size", [-1, -(2**31), 0, MAX + 1, 2**31 - 1])
def test_hostile_size_raises_before_any_body_arrives(size):
    decoder = FrameDecoder(MAX)
    with pytest.raises(FrameError, match=str(size)):
        decoder.feed(struct.pack(">i", size))
    assert decoder.buffered_bytes == 0


def test_hostile_size_split_across_feeds_raises_on_its_last_byte():
    decoder = FrameDecoder(MAX)
    prefix = struct.pack(">i", 2**31 - 1)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameError, match="exceeds"):
        decoder.feed(prefix[3:])


def test_hostile_size_after_good_frames_raises():
    decoder = FrameDecoder(MAX)
    with pytest.raises(FrameError):
        decoder.feed(stream(b"ok") + struct.pack(">i", -5))


def test_failed_decoder_keeps_failing():
    decoder = FrameDecoder(MAX)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">i", 0))
    with pytest.raises(FrameError, match="already failed"):
        decoder.feed(stream(b"fine"))


def test_frame_of_exactly_the_maximum_is_accepted():
    body = bytes(64)
    assert feed_all(FrameDecoder(64), [stream(body)]) == [body]


def test_maximum_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        FrameDecoder(0)
