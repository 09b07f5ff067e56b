"""Request/response codecs: round trips for every API version, unknown tags, malformed bodies."""

from __future__ import annotations

import dataclasses
import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.fetch.v15.request import FetchRequest, ReplicaState
from kio.schema.metadata.v9.response import MetadataResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v3.request import ProduceRequest
from kio.serial import entity_reader

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.codec import (
    decode_entity,
    decode_request_body,
    decode_response,
    encode_entity,
    encode_request,
    encode_response,
)
from spark_log.protocol.errors import EncodeError, ErrorCode, ProtocolError, UnsupportedRequestError
from spark_log.protocol.framing import FrameDecoder
from spark_log.protocol.request_header import RequestHeader, parse_request
from tests.protocol.strategies import all_messages, entities

ROUND_TRIP = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def header(api_key: int, api_version: int) -> RequestHeader:
    return RequestHeader(api_key, api_version, 1, "test", 1)


@pytest.mark.parametrize(("api_key", "version"), all_messages())
def test_request_round_trips_through_frame_header_and_body(api_key, version):
    @ROUND_TRIP
    @given(entities(API_TABLE[api_key].request_type(version)))
    def check(request):
        [frame] = FrameDecoder(1 << 24).feed(encode_request(12, "client-1", request))
        parsed, body = parse_request(frame)
        assert (parsed.api_key, parsed.api_version, parsed.correlation_id) == (
            api_key,
            version,
            12,
        )
        assert parsed.client_id == "client-1"
        assert decode_request_body(parsed, body) == request

    check()


@pytest.mark.parametrize(("api_key", "version"), all_messages())
def test_response_round_trips_through_frame(api_key, version):
    @ROUND_TRIP
    @given(entities(API_TABLE[api_key].response_type(version)))
    def check(response):
        frame = encode_response(-7, response)
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        assert decode_response(frame[4:], api_key, version) == (-7, response)

    check()


def test_unknown_tags_at_top_level_and_in_a_nested_struct_are_ignored():
    body = (
        b"\x02"  # one topic (compact array)
        + bytes(16)  # topic id: zero
        + b"\x04abc"  # name
        + b"\x01\x07\x02zz"  # topic tags: unknown tag 7
        + b"\x01\x00"  # allow auto creation, include authorized operations
        + b"\x02\x09\x01x\x0a\x00"  # top-level tags: unknown tags 9 and 10
    )
    expected = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="abc"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    with pytest.raises(KeyError, match="Unknown tagged field"):  # what kio alone does
        entity_reader(MetadataRequest)(body, 0)
    assert decode_request_body(header(3, 12), body) == expected


def test_known_tagged_struct_keeps_its_value_and_drops_its_unknown_tags():
    plain = FetchRequest(
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        topics=(),
        forgotten_topics_data=(),
    )
    replica_state = struct.pack(">iq", 3, 9) + b"\x01\x04\x01q"  # + unknown nested tag 4
    tags = b"\x02" + b"\x01" + bytes([len(replica_state)]) + replica_state + b"\x2a\x03abc"
    body = encode_entity(plain)[:-1] + tags  # replace the empty top-level tag section
    with pytest.raises(KeyError, match="Unknown tagged field"):
        entity_reader(FetchRequest)(body, 0)
    decoded = decode_request_body(header(1, 15), body)
    assert decoded == dataclasses.replace(
        plain, replica_state=ReplicaState(replica_id=3, replica_epoch=9)
    )


def test_unknown_key_raises_unsupported_with_the_header():
    request_header = header(999, 0)
    with pytest.raises(UnsupportedRequestError, match="API key 999") as caught:
        decode_request_body(request_header, b"")
    assert caught.value.header is request_header


@pytest.mark.parametrize(("api_key", "version"), [(0, 2), (1, 3), (18, 5), (1, 19)])
def test_version_outside_the_table_raises_unsupported(api_key, version):
    with pytest.raises(UnsupportedRequestError, match=f"version {version}"):
        decode_request_body(header(api_key, version), b"\x00" * 64)


def test_null_for_a_non_nullable_array_is_rejected():
    body = struct.pack(">hhii", -1, 1, 1000, -1)  # Produce v3 with topic_data = null
    with pytest.raises(ProtocolError, match="topic_data was null"):
        decode_request_body(header(0, 3), body)


def test_every_truncation_of_a_request_raises_protocol_error():
    request = ProduceRequest(
        transactional_id="txn",
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(),
    )
    body = encode_entity(request)
    for cut in range(len(body)):
        with pytest.raises(ProtocolError, match="malformed ProduceRequest v3"):
            decode_request_body(header(0, 3), body[:cut])


def test_trailing_bytes_after_a_body_are_ignored_as_kafka_does():
    body = encode_entity(
        MetadataResponse(
            throttle_time=datetime.timedelta(0),
            brokers=(),
            cluster_id=None,
            controller_id=1,
            topics=(),
        )
    )
    assert decode_entity(MetadataResponse, body + b"extra").controller_id == 1


def test_invalid_utf8_is_a_protocol_error():
    body = b"\x02" + bytes(16) + b"\x03\xff\xfe" + b"\x00\x01\x00\x00"
    with pytest.raises(ProtocolError, match=r"Unicode|UTF-8"):
        decode_request_body(header(3, 12), body)


def test_flexible_response_has_header_v1_and_api_versions_header_v0():
    metadata = MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=1, topics=()
    )
    api_versions = ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0)
    )
    assert encode_response(5, metadata)[4:9] == b"\x00\x00\x00\x05\x00"
    assert encode_response(5, api_versions)[4:10] == b"\x00\x00\x00\x05\x00\x00"  # cid, error 0


def test_encoding_a_request_as_response_is_refused():
    request = MetadataRequest(topics=None, include_topic_authorized_operations=False)
    with pytest.raises(EncodeError, match="not a kio response"):
        encode_response(1, request)


def test_encoding_a_wrongly_typed_field_raises_encode_error():
    bad = ApiVersionsResponse(error_code=0, api_keys=(), throttle_time=datetime.timedelta(0))
    with pytest.raises(EncodeError, match="ApiVersionsResponse v3"):
        encode_response(1, bad)


def test_response_decoding_refuses_unknown_apis():
    with pytest.raises(ProtocolError, match="cannot decode responses"):
        decode_response(b"\x00\x00\x00\x01", 17, 0)
