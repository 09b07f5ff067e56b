"""spark_log.protocol: the Kafka wire protocol, sans I/O: bytes in, values out, and back.

Server loop: `FrameDecoder.feed(data)` -> frames; `parse_request(frame)` -> (header, body);
`ApiSet.accepts(...)` decides; `decode_served_request(header, body)` -> the request (a kio
entity; Produce and Fetch read by hand);
`encode_response(correlation_id, entity)` -> frame bytes, or `encode_fetch_response(...)` -> parts
with the records objects in place.

Imports records/ at most and kio (the message codecs); nothing of spark_log's above it.
"""

from .api_table import API_TABLE, ApiSpec, spec_for
from .api_versions import (
    ApiSet,
    ApiVersionRange,
    encode_api_versions_unsupported,
    is_valid_client_software,
)
from .codec import (
    decode_entity,
    decode_request_body,
    decode_response,
    decode_served_request,
    encode_entity,
    encode_request,
    encode_response,
)
from .errors import EncodeError, ErrorCode, FrameError, ProtocolError, UnsupportedRequestError
from .fetch_response import SizedRecords, encode_fetch_response, records_size
from .framing import FrameDecoder, size_prefix
from .request_header import RequestHeader, parse_request, request_header_version
from .response_header import response_header_version

__all__ = [
    "API_TABLE",
    "ApiSet",
    "ApiSpec",
    "ApiVersionRange",
    "EncodeError",
    "ErrorCode",
    "FrameDecoder",
    "FrameError",
    "ProtocolError",
    "RequestHeader",
    "SizedRecords",
    "UnsupportedRequestError",
    "decode_entity",
    "decode_request_body",
    "decode_response",
    "decode_served_request",
    "encode_api_versions_unsupported",
    "encode_entity",
    "encode_fetch_response",
    "encode_request",
    "encode_response",
    "is_valid_client_software",
    "parse_request",
    "records_size",
    "request_header_version",
    "response_header_version",
    "size_prefix",
    "spec_for",
]
