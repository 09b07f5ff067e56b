"""Mutated and random frames: decoding yields a value or ProtocolError, nothing else, no hang."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.codec import decode_request_body, decode_response, encode_request
from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.framing import FrameDecoder
from spark_log.protocol.request_header import parse_request
from tests.protocol.strategies import all_messages, entities

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

valid_requests = st.sampled_from(all_messages()).flatmap(
    lambda message: entities(API_TABLE[message[0]].request_type(message[1]))
)
mutations = st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6)


def mutate(frame: bytes, changes: list[tuple[int, int]], cut: int) -> bytes:
    data = bytearray(frame)
    for position, value in changes:
        data[position % len(data)] = value
    return bytes(data[: max(1, cut % (len(data) + 1))])


def decode_request_frame(frame: bytes) -> object:
    header, body = parse_request(frame)
    return decode_request_body(header, body)


@FUZZ
@given(valid_requests, mutations, st.integers(min_value=0))
def test_mutated_request_frames_decode_or_raise_protocol_error(request, changes, cut):
    frame = mutate(encode_request(1, "fuzz", request)[4:], changes, cut)
    with contextlib.suppress(ProtocolError):  # anything else fails the test
        decode_request_frame(frame)


@FUZZ
@given(st.sampled_from(all_messages()), st.binary(min_size=8, max_size=200))
def test_random_bodies_decode_or_raise_protocol_error(message, noise):
    api_key, version = message
    frame = struct.pack(">hh", api_key, version) + noise  # noise starts with the correlation id
    with contextlib.suppress(ProtocolError):  # anything else fails the test
        decode_request_frame(frame)
    with contextlib.suppress(ProtocolError):
        decode_response(noise, api_key, version)


@FUZZ
@given(st.binary(max_size=64), st.lists(st.integers(1, 16), max_size=8))
def test_random_streams_only_ever_raise_frame_errors(data, chunk_sizes):
    decoder = FrameDecoder(1 << 10)
    position = 0
    try:
        for size in [*chunk_sizes, len(data)]:
            for frame in decoder.feed(data[position : position + size]):
                assert 0 < len(frame) <= 1 << 10
            position += size
    except ProtocolError:
        pass
