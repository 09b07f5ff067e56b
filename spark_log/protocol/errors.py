"""The exceptions the protocol layer raises, and Kafka's error codes (re-exported from kio).

Every malformed input raises a `ProtocolError` subclass whose message names the cause, so the
broker can catch one type, log the reason and close the connection, as Kafka does for an
unparseable request.
"""

from __future__ import annotations

from typing import Protocol

from kio.schema.errors import ErrorCode

__all__ = [
    "EncodeError",
    "ErrorCode",
    "FrameError",
    "ProtocolError",
    "UnsupportedRequestError",
]


class ProtocolError(ValueError):
    """Bytes (or a value to encode) that do not follow the Kafka protocol; the message says why."""


class FrameError(ProtocolError):
    """A size prefix that is negative, zero or above the configured maximum.

    Raised as soon as the four prefix bytes arrive, before any of the body is buffered. The
    decoder stays failed afterwards: the byte stream has lost its framing.
    """


class ParsedHeader(Protocol):
    """What an error keeps of a parsed request header (`request_header.RequestHeader`, which
    imports this module, so it is named by its shape)."""

    @property
    def api_key(self) -> int: ...

    @property
    def api_version(self) -> int: ...

    @property
    def correlation_id(self) -> int: ...


class UnsupportedRequestError(ProtocolError):
    """A request whose API key or version this layer cannot decode.

    Carries the parsed header so the broker can still answer (ApiVersions) or close cleanly.
    """

    def __init__(self, message: str, header: ParsedHeader) -> None:
        super().__init__(message)
        self.header = header


class EncodeError(ProtocolError):
    """A response or request entity that cannot be written (wrong field type, out of range)."""
