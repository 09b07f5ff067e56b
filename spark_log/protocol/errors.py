"""The exceptions the protocol layer raises, and Kafka's error codes (re-exported from kio).

Every malformed input raises a `ProtocolError` subclass whose message names the cause, so the
broker can catch one type, log the reason and close the connection, as Kafka does for an
unparseable request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from .request_header import RequestHeader

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


class UnsupportedRequestError(ProtocolError):
    """A request whose API key or version this layer cannot decode.

    Carries the parsed header so the broker can still answer (ApiVersions) or close cleanly.
    """

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class EncodeError(ProtocolError):
    """A response or request entity that cannot be written (wrong field type, out of range)."""
