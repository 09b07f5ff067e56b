"""Request headers: version choice, parsing any request's header, malformed headers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.request_header import (
    encode_request_header,
    parse_request,
    request_header_version,
)


@pytest.mark.parametrize(
    ("api_key", "api_version", "expected"),
    [
        (7, 0, 0),  # ControlledShutdown v0: no client id
        (0, 8, 1),  # Produce v8: last non-flexible
        (0, 9, 2),  # Produce v9: first flexible
        (18, 2, 1),
        (18, 3, 2),
        (18, 99, 2),  # a future ApiVersions is still flexible
        (3, 8, 1),
        (3, 9, 2),
        (1000, 0, 1),  # unknown key: read as v1
    ],
)
def test_header_version_follows_key_and_version(api_key, api_version, expected):
    assert request_header_version(api_key, api_version) == expected


@settings(max_examples=200, deadline=None)
@given(
    api_key=st.sampled_from([0, 1, 3, 7, 18, 60, 2000]),
    api_version=st.integers(0, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=20),
    body=st.binary(max_size=20),
)
def test_encoded_header_parses_back(api_key, api_version, correlation_id, client_id, body):
    frame = encode_request_header(api_key, api_version, correlation_id, client_id) + body
    header, rest = parse_request(frame)
    version = request_header_version(api_key, api_version)
    assert (header.api_key, header.api_version) == (api_key, api_version)
    assert header.correlation_id == correlation_id
    assert header.header_version == version
    assert header.client_id == ((client_id or "") if version >= 1 else "")
    assert bytes(rest) == body


def test_null_client_id_reads_as_empty_string():
    header, _ = parse_request(struct.pack(">hhih", 3, 1, 9, -1))
    assert header.client_id == ""


def test_v2_header_skips_its_tagged_fields():
    frame = struct.pack(">hhih", 18, 3, 5, 1) + b"c" + b"\x02\x00\x01z\x07\x00" + b"BODY"
    header, body = parse_request(frame)
    assert (header.client_id, header.header_version) == ("c", 2)
    assert bytes(body) == b"BODY"


def test_unsupported_version_still_yields_header():
    header, _ = parse_request(encode_request_header(0, 2, 77, "old-client") + b"....")
    assert (header.api_key, header.api_version, header.correlation_id) == (0, 2, 77)
    assert header.client_id == "old-client"


def test_unknown_key_still_yields_header():
    header, body = parse_request(encode_request_header(500, 3, 12, "x") + b"rest")
    assert (header.api_key, header.correlation_id, bytes(body)) == (500, 12, b"rest")


def test_body_is_a_view_not_a_copy():
    frame = encode_request_header(3, 1, 1, "c") + b"body"
    _, body = parse_request(frame)
    assert body.obj is frame


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"\x00\x03\x00\x01\x00\x00", "truncated request header"),
        (struct.pack(">hhih", 3, 1, 1, 10) + b"short", "truncated client id"),
        (struct.pack(">hhih", 3, 1, 1, -2), "invalid client id length"),
        (struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe", "UTF-8"),
        (struct.pack(">hhi", 3, 1, 1) + b"\x00", "truncated client id length"),
        (struct.pack(">hhih", 18, 3, 1, 0) + b"\x01\x00\x05ab", "tagged field"),
    ],
)
def test_malformed_header_raises_protocol_error(frame, reason):
    with pytest.raises(ProtocolError, match=reason):
        parse_request(frame)
