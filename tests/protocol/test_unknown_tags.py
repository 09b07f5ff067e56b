"""strip_unknown_tags: unknown tags removed at every depth, everything else byte-identical."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v3.request import ProduceRequest

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.codec import encode_entity
from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.unknown_tags import strip_unknown_tags
from tests.protocol.strategies import entities

FLEXIBLE_MESSAGES = [
    entity
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.topic_id_max_version + 1)
    if spec.is_flexible(version)
    for entity in (spec.request_type(version), spec.response_type(version))
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FLEXIBLE_MESSAGES).flatmap(entities))
def test_message_without_unknown_tags_is_unchanged(entity):
    body = encode_entity(entity)
    assert strip_unknown_tags(type(entity), body) == body


@settings(max_examples=50, deadline=None)
@given(entities(ProduceRequest))
def test_non_flexible_message_is_copied_through(entity):
    body = encode_entity(entity)
    assert strip_unknown_tags(ProduceRequest, body + b"trailing") == body


def test_unknown_tags_are_removed_at_top_level_and_nested():
    with_tags = b"\x02" + bytes(16) + b"\x02a" + b"\x01\x07\x02zz" + b"\x00\x01" + b"\x01\x63\x00"
    without = b"\x02" + bytes(16) + b"\x02a" + b"\x00" + b"\x00\x01" + b"\x00"
    assert strip_unknown_tags(MetadataRequest, with_tags) == without


def test_known_struct_tag_is_kept_with_its_own_unknown_tags_removed():
    # FetchResponse v12 with one partition carrying tag 1 (current_leader) holding tag 9.
    leader = struct.pack(">ii", 4, 5)
    partition_head = struct.pack(">ihqqq", 0, 0, 10, -1, -1) + b"\x00" + struct.pack(">i", -1)
    records = b"\x00"

    def body(leader_tags: bytes) -> bytes:
        value = leader + leader_tags
        tags = b"\x01\x01" + bytes([len(value)]) + value
        topic = b"\x02t" + b"\x02" + partition_head + records + tags + b"\x00"
        return struct.pack(">ihi", 0, 0, 0) + b"\x02" + topic + b"\x00"

    assert strip_unknown_tags(FetchResponse, body(b"\x01\x09\x01x")) == body(b"\x00")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x02" + bytes(10), "truncated"),
        (b"\x02" + bytes(16) + b"\x02a" + b"\x01\x07\x09zz", "tag 7 value"),
        (b"\xff\xff\xff\xff\x0f", "count"),
        (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
    ],
)
def test_malformed_input_raises_protocol_error(body, reason):
    with pytest.raises(ProtocolError, match=reason):
        strip_unknown_tags(MetadataRequest, body)
