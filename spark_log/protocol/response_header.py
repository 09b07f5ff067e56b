"""Response headers: v0 is the correlation id, v1 adds an (empty) tagged-field section.

Flexible API versions answer with v1, others with v0, except ApiVersions, which always answers
with v0 so a client can read the error of a version it guessed too high (KIP-511).
"""

from __future__ import annotations

from .api_table import API_VERSIONS_KEY, is_flexible
from .wire import INT32, need, skip_tag_section

__all__ = ["encode_response_header", "parse_response_header", "response_header_version"]

_V0 = 0
_V1 = 1
_NO_TAGS = b"\x00"


def response_header_version(api_key: int, api_version: int) -> int:
    """The header version Kafka uses for responses of this API key and version."""
    if api_key == API_VERSIONS_KEY:
        return _V0
    return _V1 if is_flexible(api_key, api_version) else _V0


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """The header bytes for a response (header version 0 or 1)."""
    if header_version == _V0:
        return INT32.pack(correlation_id)
    if header_version == _V1:
        return INT32.pack(correlation_id) + _NO_TAGS
    raise ValueError(f"no response header version {header_version}")


def parse_response_header(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, memoryview]:
    """Split a response frame into its correlation id and a view of the body (client side)."""
    view = memoryview(frame).cast("B")
    end = len(view)
    need(end, 0, INT32.size, "response header")
    correlation_id = INT32.unpack_from(view, 0)[0]
    pos = INT32.size
    if response_header_version(api_key, api_version) == _V1:
        pos = skip_tag_section(view, pos, end, "response header")
    return correlation_id, view[pos:]
