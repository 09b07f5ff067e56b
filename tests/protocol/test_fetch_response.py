"""encode_fetch_response: parts whose concatenation is kio's encoding, records objects in place."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.metadata.v9.response import MetadataResponse

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.codec import decode_response, encode_response
from spark_log.protocol.entity_build import build
from spark_log.protocol.errors import EncodeError, ErrorCode
from spark_log.protocol.fetch_response import (
    encode_fetch_response,
    encode_plain_fetch_response,
    records_size,
)
from tests.protocol.strategies import entities

FETCH = API_TABLE[1]
VERSIONS = range(FETCH.min_version, FETCH.topic_id_max_version + 1)
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclasses.dataclass(frozen=True, eq=False)
class FileSlice:
    """Stands in for a storage file slice: only `size` is visible to the encoder."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


def joined(parts: list) -> bytes:
    return b"".join(part.data if isinstance(part, FileSlice) else bytes(part) for part in parts)


def map_records(response, convert):
    """`response` with every partition's records replaced by `convert(records)`."""
    topics = tuple(
        dataclasses.replace(
            topic,
            partitions=tuple(
                dataclasses.replace(p, records=None if p.records is None else convert(p.records))
                for p in topic.partitions
            ),
        )
        for topic in response.responses
    )
    return dataclasses.replace(response, responses=topics)


def all_records(response) -> list:
    return [p.records for t in response.responses for p in t.partitions if p.records is not None]


@pytest.mark.parametrize("version", VERSIONS)
def test_parts_join_to_kios_encoding_and_decode_back(version):
    @EXAMPLES
    @given(entities(FETCH.response_type(version)), st.integers(-(2**31), 2**31 - 1))
    def check(response, correlation_id):
        parts = encode_fetch_response(correlation_id, response)
        assert joined(parts) == encode_response(correlation_id, response)
        frame = joined(parts)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert decode_response(frame[4:], 1, version) == (correlation_id, response)

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_records_objects_are_placed_in_the_parts_uncopied(version):
    @EXAMPLES
    @given(entities(FETCH.response_type(version)))
    def check(response):
        sliced = map_records(response, FileSlice)
        parts = encode_fetch_response(9, sliced)
        placed = [part for part in parts if isinstance(part, FileSlice)]
        assert placed == [r for r in all_records(sliced) if r.size]  # same objects, in order
        assert all(isinstance(part, bytes) for part in parts if not isinstance(part, FileSlice))
        _, decoded = decode_response(joined(parts)[4:], 1, version)
        assert decoded == response

    check()


def partition(records) -> PartitionData:
    return PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=5,
        aborted_transactions=None,
        records=records,
    )


def response_of(*partitions: PartitionData) -> FetchResponse:
    return FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(FetchableTopicResponse(topic="t", partitions=partitions),),
    )


def test_parts_alternate_between_our_bytes_and_records():
    first, second = FileSlice(b"a" * 100), FileSlice(b"b" * 50)
    parts = encode_fetch_response(1, response_of(partition(first), partition(second)))
    assert [type(part) for part in parts] == [bytes, FileSlice, bytes, FileSlice, bytes]
    assert parts[1] is first and parts[3] is second
    assert int.from_bytes(parts[0][:4], "big") == sum(map(records_size, parts)) - 4


def test_plain_bytes_records_are_placed_as_given():
    records = b"x" * 1000
    parts = encode_fetch_response(1, response_of(partition(records)))
    assert any(part is records for part in parts)


def test_empty_records_object_contributes_only_its_length():
    empty = FileSlice(b"")
    parts = encode_fetch_response(1, response_of(partition(empty)))
    assert all(part is not empty for part in parts)
    assert joined(parts) == encode_response(1, response_of(partition(b"")))


@pytest.mark.parametrize("size", [-1, 2**31, "10", True, None])
def test_records_without_a_valid_size_are_refused(size):
    bad = type("Bad", (), {"size": size})()
    with pytest.raises(EncodeError, match="no valid size"):
        encode_fetch_response(1, response_of(partition(bad)))


def test_memoryview_records_count_bytes_not_items():
    view = memoryview(bytes(range(16))).cast("I")
    assert records_size(view) == 16


def test_only_fetch_responses_are_accepted():
    other = MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=1, topics=()
    )
    with pytest.raises(EncodeError, match="not a kio FetchResponse"):
        encode_fetch_response(1, other)


def test_out_of_range_field_raises_encode_error():
    bad = dataclasses.replace(partition(b"r"), high_watermark=2**63)
    with pytest.raises(EncodeError, match="FetchResponse v12"):
        encode_fetch_response(1, response_of(bad))


def test_many_partitions_keep_their_records_in_order():
    slices = [FileSlice(bytes([n]) * (n + 1)) for n in range(20)]
    parts = encode_fetch_response(3, response_of(*(partition(s) for s in slices)))
    assert [part for part in parts if isinstance(part, FileSlice)] == slices  # identity


_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_PLAIN_PARTITION = st.fixed_dictionaries({
    "partition_index": _I32,
    "error_code": st.sampled_from([ErrorCode.none, ErrorCode.offset_out_of_range,
                                   ErrorCode.unknown_topic_or_partition]),
    "high_watermark": _I64, "last_stable_offset": _I64, "log_start_offset": _I64,
    "aborted_transactions": st.none() | st.lists(
        st.fixed_dictionaries({"producer_id": _I64, "first_offset": _I64}), max_size=3),
    "preferred_read_replica": _I32,
    "records": st.binary(max_size=40) | st.binary(max_size=40).map(FileSlice),
})
_PLAIN_TOPICS = st.lists(st.fixed_dictionaries({
    "topic": st.text(max_size=12), "topic_id": st.uuids(),
    "partitions": st.lists(_PLAIN_PARTITION, max_size=4)}), max_size=3)


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_values_encode_as_the_built_entity_does(version):
    """The fetch handler's usual answer, written straight from its values, is byte for byte
    the entity path's frame, with the same records objects in the same places."""
    @EXAMPLES
    @given(_PLAIN_TOPICS, _I32, st.sampled_from([ErrorCode.none,
                                                 ErrorCode.fetch_session_id_not_found]), _I32)
    def check(topics, correlation_id, error_code, session_id):
        value = {"throttle_time": 0, "error_code": error_code, "session_id": session_id,
                 "responses": topics, "node_endpoints": []}
        entity_parts = encode_fetch_response(
            correlation_id, build(FETCH.response_type(version), value))
        plain_parts = encode_plain_fetch_response(correlation_id, version, error_code,
                                                  session_id, topics)
        assert joined(plain_parts) == joined(entity_parts)
        placed = [part for part in plain_parts if isinstance(part, FileSlice)]
        assert placed == [p["records"] for t in topics for p in t["partitions"]
                          if isinstance(p["records"], FileSlice) and p["records"].size]

    check()


def test_plain_values_refuse_a_version_before_record_batch_v2():
    with pytest.raises(EncodeError, match="v3"):
        encode_plain_fetch_response(1, 3, ErrorCode.none, 0, [])
