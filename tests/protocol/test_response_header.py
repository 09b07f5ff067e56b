"""Response headers: v0 / v1 choice (ApiVersions always v0), writing and reading them."""

from __future__ import annotations

import pytest

from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.response_header import (
    encode_response_header,
    parse_response_header,
    response_header_version,
)


@pytest.mark.parametrize(
    ("api_key", "api_version", "expected"),
    [(18, 0, 0), (18, 3, 0), (18, 4, 0), (3, 8, 0), (3, 9, 1), (1, 11, 0), (1, 12, 1)],
)
def test_header_version(api_key, api_version, expected):
    assert response_header_version(api_key, api_version) == expected


def test_v0_is_the_correlation_id_alone():
    assert encode_response_header(258, 0) == b"\x00\x00\x01\x02"


def test_v1_adds_an_empty_tag_section():
    assert encode_response_header(-1, 1) == b"\xff\xff\xff\xff\x00"


def test_unknown_header_version_is_refused():
    with pytest.raises(ValueError, match="no response header version 2"):
        encode_response_header(1, 2)


@pytest.mark.parametrize(("api_key", "api_version"), [(3, 12), (3, 4), (18, 3)])
def test_parse_reads_back_what_encode_wrote(api_key, api_version):
    version = response_header_version(api_key, api_version)
    frame = encode_response_header(99, version) + b"body"
    correlation_id, body = parse_response_header(frame, api_key, api_version)
    assert (correlation_id, bytes(body)) == (99, b"body")


def test_parse_skips_unknown_header_tags():
    frame = b"\x00\x00\x00\x07" + b"\x01\x03\x02hi" + b"body"
    assert bytes(parse_response_header(frame, 3, 12)[1]) == b"body"


def test_truncated_response_header_raises():
    with pytest.raises(ProtocolError, match="truncated"):
        parse_response_header(b"\x00\x01", 3, 1)
