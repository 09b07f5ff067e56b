"""Request headers: which version a request uses, parsing one off a frame, writing one.

Header v0 is `api_key int16, api_version int16, correlation_id int32`; v1 adds `client_id`
(a nullable int16-length string, in every version); v2 adds a tagged-field section. The version
follows from the API key and version alone: flexible API versions use v2, ControlledShutdown v0
uses v0, everything else v1. Kafka reads a null client id as "", and so do we.

`parse_request` reads a frame in one native call when the extension is built; whatever that call
leaves undecided (and every frame without the extension) takes `parse_request_py`, which defines
the behaviour and names the error.
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

from .api_table import CONTROLLED_SHUTDOWN_KEY, is_flexible
from .errors import ProtocolError
from .native_wire import NATIVE_WIRE
from .wire import INT16, INT32, need, read_int16, skip_tag_section

__all__ = ["RequestHeader", "encode_request_header", "parse_request", "request_header_version"]

_FIXED_PART = 8  # api_key + api_version + correlation_id
_FIXED = struct.Struct(">hhi")


class RequestHeader(NamedTuple):
    """A parsed request header. `header_version` is 0, 1 or 2; `client_id` is never None.
    (A named tuple: one is built per request, cheaper than a frozen dataclass.)"""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    header_version: int


@functools.lru_cache(maxsize=1024)  # asked per request; bounded, as a client picks the keys
def request_header_version(api_key: int, api_version: int) -> int:
    """The header version Kafka uses for requests of this API key and version."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def parse_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, memoryview]:
    """Split a request frame (without size prefix) into its header and a view of the body.

    Works for any API key and version, supported or not, so the broker always learns the
    correlation id; an unknown key is read with header v1. Raises `ProtocolError` if the frame
    is too short or the header itself is malformed.
    """
    if _native_parse is not None:
        parsed = _native_parse(frame, RequestHeader, request_header_version)
        if parsed is not None:
            return parsed
    return parse_request_py(frame)


def parse_request_py(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, memoryview]:
    """`parse_request` in Python alone: the native reader's twin, which defines it."""
    view = memoryview(frame).cast("B")
    end = len(view)
    need(end, 0, _FIXED_PART, "request header")
    api_key, api_version, correlation_id = _FIXED.unpack_from(view, 0)
    header_version = request_header_version(api_key, api_version)
    pos = _FIXED_PART
    client_id = ""
    if header_version >= 1:
        client_id, pos = _read_client_id(view, pos, end)
    if header_version >= 2:
        pos = skip_tag_section(view, pos, end, "request header")
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, view[pos:]


_native_parse = NATIVE_WIRE.parse_request if NATIVE_WIRE is not None else None
NATIVE = _native_parse is not None


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The header bytes a client sends before a request body (the version follows the API)."""
    header_version = request_header_version(api_key, api_version)
    out = bytearray(INT16.pack(api_key) + INT16.pack(api_version) + INT32.pack(correlation_id))
    if header_version >= 1:
        if client_id is None:
            out += INT16.pack(-1)
        else:
            encoded = client_id.encode()
            out += INT16.pack(len(encoded)) + encoded
    if header_version >= 2:
        out.append(0)  # no tagged fields
    return bytes(out)


def _read_client_id(view: memoryview, pos: int, end: int) -> tuple[str, int]:
    length, pos = read_int16(view, pos, end, "client id length")
    if length == -1:
        return "", pos
    if length < 0:
        raise ProtocolError(f"invalid client id length {length}")
    need(end, pos, length, "client id")
    try:
        return str(view[pos : pos + length], "utf-8"), pos + length
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"client id is not valid UTF-8: {exc}") from None
