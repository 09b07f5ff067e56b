"""A declared array count or length larger than the frame is a ProtocolError before kio reads it
(kio's native reader would reserve memory for the declared count and abort the process)."""

from __future__ import annotations

import struct

import pytest

from spark_log.protocol import ProtocolError, decode_request_body, parse_request
from spark_log.protocol.api_keys import ApiKey

HEADER_V12 = struct.pack(">hhih", ApiKey.METADATA, 12, 0, 4) + b"fuzz" + b"\x00"
HEADER_V1 = struct.pack(">hhih", ApiKey.METADATA, 1, 0, 4) + b"fuzz"


@pytest.mark.parametrize("frame", [
    HEADER_V12 + b"\x92\xb9\xc6\x8b\x6e" + b"\x00" * 20,   # compact array of ~29 billion topics
    HEADER_V1 + struct.pack(">i", 0x7FFF_FFFF) + b"\x00" * 8,  # legacy array count
    HEADER_V12 + b"\x02" + b"\x00" * 16 + b"\xff\xff\xff\x0f",  # topic name longer than frame
], ids=["compact-count", "legacy-count", "string-length"])
def test_oversized_counts_are_protocol_errors(frame: bytes) -> None:
    header, body = parse_request(frame)
    with pytest.raises(ProtocolError):
        decode_request_body(header, body)
