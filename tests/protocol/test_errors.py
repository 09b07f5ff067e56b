"""One catchable ProtocolError type; ErrorCode is kio's table, not a copy."""

from __future__ import annotations

import kio.schema.errors

from spark_log.protocol import errors
from spark_log.protocol.request_header import RequestHeader


def test_every_protocol_exception_is_a_protocol_error():
    for exc_type in (errors.FrameError, errors.UnsupportedRequestError, errors.EncodeError):
        assert issubclass(exc_type, errors.ProtocolError)


def test_unsupported_request_error_carries_its_header():
    header = RequestHeader(99, 1, 5, "c", 1)
    exc = errors.UnsupportedRequestError("unsupported API key 99", header)
    assert exc.header is header
    assert str(exc) == "unsupported API key 99"


def test_error_code_is_kios_enum():
    assert errors.ErrorCode is kio.schema.errors.ErrorCode
    assert errors.ErrorCode.unsupported_version == 35
