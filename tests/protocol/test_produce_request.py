"""The hand-written Produce reader agrees with kio on every version, and refuses bad input as
cleanly: any frame decodes to the same values or raises ProtocolError."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.protocol.api_table import spec_for
from spark_log.protocol.codec import encode_entity
from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.produce_request import (
    MAX_VERSION,
    MIN_VERSION,
    decode_produce_request,
)
from tests.protocol.hand_readers import assert_reads_as_kio, mutated
from tests.protocol.strategies import entities

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
CHECKS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def kio_type(version: int) -> type:
    spec = spec_for(0)
    assert spec is not None
    return spec.request_type(version)


def as_kio_values(request) -> tuple:
    """What the broker reads of a kio ProduceRequest, in the hand reader's shape."""
    return (request.transactional_id, request.acks,
            request.timeout // datetime.timedelta(milliseconds=1),
            tuple((t.name, tuple((p.index, None if p.records is None else bytes(p.records))
                                 for p in t.partition_data)) for t in request.topic_data))


def as_values(request) -> tuple:
    return (request.transactional_id, request.acks, request.timeout_ms,
            tuple((t.name, tuple((p.index, None if p.records is None else bytes(p.records))
                                 for p in t.partition_data)) for t in request.topic_data))


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data())
def test_every_version_decodes_as_kio_does(version, data):
    request = data.draw(entities(kio_type(version)))
    body = encode_entity(request)
    assert as_values(decode_produce_request(version, body)) == as_kio_values(request)


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data(), changes=st.lists(st.tuples(st.integers(0), st.integers(0, 255)),
                                        max_size=6), cut=st.integers(0))
def test_mutated_bodies_decode_as_kio_does_or_raise_protocol_error(version, data, changes, cut):
    body = mutated(encode_entity(data.draw(entities(kio_type(version)))), changes, cut)
    assert_reads_as_kio(kio_type(version), body, lambda b: decode_produce_request(version, b),
                        as_values, as_kio_values, f"ProduceRequest v{version}")


def test_records_are_views_of_the_frame_not_copies():
    body = bytearray(struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 1) + b"t"
                     + struct.pack(">ii", 1, 7) + struct.pack(">i", 3) + b"abc")
    request = decode_produce_request(3, bytes(body))
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"abc"
    assert (request.acks, request.timeout_ms, request.transactional_id) == (1, 1000, None)


def test_unknown_tagged_fields_are_skipped():
    # v9 (flexible): txn id null, acks 1, timeout 5, one topic "t" with one partition 0 holding
    # "ab", each level carrying a tag Produce does not define
    tag = b"\x01\x05\x02zz"  # one tagged field: tag 5, two bytes
    body = (b"\x00" + struct.pack(">hi", 1, 5) + b"\x02" + b"\x02t" + b"\x02"
            + struct.pack(">i", 0) + b"\x03ab" + tag + tag + tag)
    request = decode_produce_request(9, body)
    assert as_values(request) == (None, 1, 5, (("t", ((0, b"ab"),)),))


@pytest.mark.parametrize(("body", "message"), [
    (struct.pack(">hhii", -1, 1, 1000, -1), "topic_data was null"),
    (struct.pack(">hhii", -1, 1, 1000, 2_000_000_000), "claims 2000000000 elements"),
    (struct.pack(">hhiih", -1, 1, 1000, 1, -1), "topic name is null"),
    (struct.pack(">hhiih", -1, 1, 1000, 1, 2) + b"\xff\xfe", "not UTF-8"),
    (struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t" + struct.pack(">iii", 1, 0, 99),
     "truncated records: 99 bytes"),
    (struct.pack(">hh", -1, 1), "truncated acks and timeout_ms"),
])
def test_bad_bodies_are_refused_with_a_clear_error(body, message):
    with pytest.raises(ProtocolError, match=message):
        decode_produce_request(3, body)


def test_versions_outside_the_reader_are_refused():
    with pytest.raises(ProtocolError, match="Produce v2"):
        decode_produce_request(2, b"")
