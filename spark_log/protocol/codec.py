"""Request and response bodies <-> kio entities, and whole frames out.

Server side: `decode_request_body` turns the body `parse_request` split off into the kio request
entity for its key and version; `encode_response` writes a kio response entity as a complete
frame (size prefix + response header + body). Client side (tests, tools): `encode_request` and
`decode_response`. kio does the field work; this module adds what kio lacks: unknown tagged
fields are skipped (see `unknown_tags`), null non-nullable arrays rejected (see `null_check`),
and any failure comes out as one `ProtocolError` naming the message and the cause.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from .api_table import spec_for
from .errors import EncodeError, ProtocolError, UnsupportedRequestError
from .fetch_request import decode_fetch_request
from .framing import SIZE_PREFIX
from .null_check import check_non_null
from .produce_request import decode_produce_request
from .request_header import RequestHeader, encode_request_header
from .response_header import (
    encode_response_header,
    parse_response_header,
    response_header_version,
)
from .unknown_tags import check_structure, strip_unknown_tags

__all__ = [
    "decode_entity",
    "decode_request_body",
    "decode_response",
    "decode_served_request",
    "encode_entity",
    "encode_request",
    "encode_response",
]

_PRODUCE_KEY, _FETCH_KEY = 0, 1
_UNKNOWN_TAG = "Unknown tagged field"  # kio's KeyError message for a tag it does not know


def decode_request_body(header: RequestHeader, body: bytes | memoryview) -> RequestPayload:
    """The kio request entity for `header`'s key and version, decoded from `body`.

    Raises `UnsupportedRequestError` (carrying the header) for a key or version outside the
    API table, `ProtocolError` for a body that does not decode.
    """
    spec = spec_for(header.api_key)
    if spec is None:
        raise UnsupportedRequestError(f"unsupported API key {header.api_key}", header)
    if not spec.accepts(header.api_version):
        raise UnsupportedRequestError(
            f"unsupported {spec.name} version {header.api_version} "
            f"(supported {spec.min_version}-{spec.topic_id_max_version})",
            header,
        )
    entity = decode_entity(spec.request_type(header.api_version), body)
    return entity  # type: ignore[return-value]


def decode_served_request(header: RequestHeader, body: bytes | memoryview) -> Any:
    """The request as the broker's handlers read it: Produce and Fetch, the hottest, by their
    hand-written readers (`produce_request`, `fetch_request`: one pass, records left in the
    frame), every other API as its kio entity (`decode_request_body`)."""
    if header.api_key == _PRODUCE_KEY:
        return decode_produce_request(header.api_version, body)
    if header.api_key == _FETCH_KEY:
        return decode_fetch_request(header.api_version, body)
    return decode_request_body(header, body)


def decode_entity(entity_type: type[Entity], body: bytes | memoryview) -> Entity:
    """Decode one entity of `entity_type` from `body`; trailing bytes are ignored, as in Kafka."""
    try:
        check_structure(entity_type, body)
    except ProtocolError as exc:
        raise _malformed(entity_type, exc) from None
    read = _reader(entity_type)
    try:
        value, _size = read(body, 0)
    except KeyError as exc:
        if _UNKNOWN_TAG not in str(exc):
            raise _malformed(entity_type, exc) from None
        value = _decode_without_unknown_tags(entity_type, body)
    except Exception as exc:  # kio raises several types; callers get exactly one
        raise _malformed(entity_type, exc) from None
    check_non_null(value)
    return value


def encode_response(correlation_id: int, response: ResponsePayload) -> bytes:
    """A complete response frame: size prefix, response header, body.

    The API key and version come from the entity's class, the header version from them.
    """
    if getattr(response, "__type__", None) is not EntityType.response:
        raise EncodeError(f"not a kio response entity: {type(response).__name__}")
    header_version = response_header_version(response.__api_key__, response.__version__)
    return _frame(encode_response_header(correlation_id, header_version), response)


def encode_request(correlation_id: int, client_id: str | None, request: RequestPayload) -> bytes:
    """A complete request frame, as a client sends it."""
    if getattr(request, "__type__", None) is not EntityType.request:
        raise EncodeError(f"not a kio request entity: {type(request).__name__}")
    header = encode_request_header(
        request.__api_key__, request.__version__, correlation_id, client_id
    )
    return _frame(header, request)


def decode_response(
    frame: bytes | memoryview, api_key: int, api_version: int
) -> tuple[int, ResponsePayload]:
    """(correlation id, kio response entity) from a response frame without its size prefix."""
    spec = spec_for(api_key)
    if spec is None or not spec.accepts(api_version):
        raise ProtocolError(f"cannot decode responses of API {api_key} v{api_version}")
    correlation_id, body = parse_response_header(frame, api_key, api_version)
    entity = decode_entity(spec.response_type(api_version), body)
    return correlation_id, entity  # type: ignore[return-value]


def encode_entity(entity: Entity) -> bytes:
    """The body bytes of `entity` alone (no header, no prefix)."""
    out = io.BytesIO()
    _write(out, entity)
    return out.getvalue()


def _frame(header: bytes, entity: Entity) -> bytes:
    out = io.BytesIO()
    out.write(bytes(SIZE_PREFIX.size))
    out.write(header)
    _write(out, entity)
    with out.getbuffer() as frame:
        SIZE_PREFIX.pack_into(frame, 0, len(frame) - SIZE_PREFIX.size)
    return out.getvalue()


def _write(out: io.BytesIO, entity: Entity) -> None:
    try:
        _writer(type(entity))(out, entity)
    except Exception as exc:  # kio raises AttributeError, struct.error, OutOfBoundValue, ...
        raise EncodeError(f"cannot encode {_describe(type(entity))}: {exc!r}") from None


def _decode_without_unknown_tags(entity_type: type[Entity], body: bytes | memoryview) -> Entity:
    stripped = strip_unknown_tags(entity_type, body)
    try:
        value, _size = _reader(entity_type)(stripped, 0)
    except Exception as exc:
        raise _malformed(entity_type, exc) from None
    return value


def _malformed(entity_type: type[Entity], exc: BaseException) -> ProtocolError:
    return ProtocolError(f"malformed {_describe(entity_type)}: {type(exc).__name__}: {exc}")


def _describe(entity_type: type[Entity]) -> str:
    return f"{entity_type.__name__} v{entity_type.__version__}"


@functools.cache
def _reader(entity_type: type[Entity]) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(entity_type)


@functools.cache
def _writer(entity_type: type[Entity]) -> Callable[[Any, Any], None]:
    return entity_writer(entity_type)
