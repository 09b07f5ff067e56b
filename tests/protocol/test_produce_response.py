"""The hand-written Produce response equals kio's encoding byte for byte, in every version."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.protocol import decode_response, encode_response, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build
from spark_log.protocol.produce_response import (
    NodeEndpoint,
    PartitionResult,
    encode_produce_response,
)

SPEC = spec_for(ApiKey.PRODUCE)
assert SPEC is not None
VERSIONS = range(SPEC.min_version, SPEC.topic_id_max_version + 1)

record_errors = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.none() | st.text(max_size=40)),
                         max_size=3)
partitions = st.builds(
    PartitionResult,
    index=st.integers(0, 2**31 - 1), error_code=st.integers(-1, 120),
    base_offset=st.integers(-1, 2**62), log_append_time=st.one_of(st.just(-1),
                                                                   st.integers(0, 2**42)),
    log_start_offset=st.integers(-1, 2**62), error_message=st.none() | st.text(max_size=40),
    record_errors=st.just(()) | record_errors,
    current_leader=st.none() | st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1)))
endpoints = st.lists(st.builds(NodeEndpoint, node_id=st.integers(0, 2**31 - 1),
                               host=st.text(min_size=1, max_size=20),
                               port=st.integers(0, 65535), rack=st.none() | st.text(max_size=8)),
                     max_size=3)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=30), st.lists(partitions, max_size=4)),
                  max_size=4)


def as_dict(results: list[tuple[str, list[PartitionResult]]], throttle: int, version: int,
            nodes: list[NodeEndpoint] = ()) -> dict:  # type: ignore[assignment]
    def partition(p: PartitionResult) -> dict:
        entry = {**p._asdict(), "record_errors": [
            {"batch_index": index, "batch_index_error_message": message}
            for index, message in p.record_errors]}
        del entry["current_leader"]
        if version >= 10:
            leader = p.current_leader or (-1, -1)
            entry["current_leader"] = {"leader_id": leader[0], "leader_epoch": leader[1]}
        return entry

    body = {"throttle_time": throttle, "responses": [
        {"name": name, "partition_responses": [partition(p) for p in parts]}
        for name, parts in results]}
    if version >= 10:
        body["node_endpoints"] = [n._asdict() for n in nodes]
    return body


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), results=topics,
       throttle=st.integers(0, 2**31 - 1), correlation=st.integers(-(2**31), 2**31 - 1),
       nodes=endpoints)
def test_equals_kio_encoding(version: int, results: list, throttle: int,
                             correlation: int, nodes: list) -> None:
    if version < 10:
        results = [(n, [p._replace(current_leader=None) for p in ps]) for n, ps in results]
        nodes = []
    expected = encode_response(correlation, build(SPEC.response_type(version),
                                                  as_dict(results, throttle, version, nodes)))
    assert encode_produce_response(correlation, version, results, throttle, nodes) == expected


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
def test_record_errors_equal_kio_encoding(version: int) -> None:
    """A refused batch: two records named, one message null, beside a partition appended."""
    refused = PartitionResult(1, 87, -1, -1, 4, "One or more records have been rejected",
                              ((0, "no key"), (2, None)))
    results = [("orders", [refused, PartitionResult(0, 0, 42, -1, 0, None)])]
    expected = encode_response(7, build(SPEC.response_type(version),
                                        as_dict(results, 0, version)))
    frame = encode_produce_response(7, version, results)
    assert frame == expected
    p = decode_response(frame[4:], ApiKey.PRODUCE, version)[1].responses[0].partition_responses[0]
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == \
        [(0, "no key"), (2, None)]
    assert (p.error_code, p.error_message, p.log_start_offset) == \
        (87, "One or more records have been rejected", 4)


def test_decodes_back_with_kio() -> None:
    results = [("orders", [PartitionResult(3, 0, 42, -1, 7, None)])]
    frame = encode_produce_response(9, 11, results)
    correlation, response = decode_response(frame[4:], ApiKey.PRODUCE, 11)
    assert correlation == 9
    p = response.responses[0].partition_responses[0]
    assert (response.responses[0].name, p.index, p.base_offset, p.log_start_offset) == \
        ("orders", 3, 42, 7)


def test_a_partition_led_elsewhere_names_its_leader_and_where_it_listens() -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint (v10+)."""
    moved = PartitionResult(0, 6, -1, -1, -1, None, current_leader=(3, 7))
    frame = encode_produce_response(5, 11, [("orders", [moved])], 0,
                                    [NodeEndpoint(3, "broker-3", 9092, "r1")])
    response = decode_response(frame[4:], ApiKey.PRODUCE, 11)[1]
    p = response.responses[0].partition_responses[0]
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (3, 7)
    (node,) = response.node_endpoints
    assert (node.node_id, node.host, node.port, node.rack) == (3, "broker-3", 9092, "r1")


plain_partitions = st.builds(
    PartitionResult, index=st.integers(0, 2**31 - 1), error_code=st.integers(-1, 120),
    base_offset=st.integers(-1, 2**62), log_append_time=st.integers(-1, 2**42),
    log_start_offset=st.integers(-1, 2**62), error_message=st.none(), record_errors=st.just(()),
    current_leader=st.none())


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from([v for v in VERSIONS if v >= 8]), partition=plain_partitions,
       name=st.text(min_size=1, max_size=30), throttle=st.integers(0, 2**31 - 1),
       correlation=st.integers(-(2**31), 2**31 - 1))
def test_one_plain_partition_equals_kio_encoding(version: int, partition: PartitionResult,
                                                 name: str, throttle: int,
                                                 correlation: int) -> None:
    """The usual answer (one topic, one partition without errors or leader) takes a shorter
    path; it writes the same bytes, the same topic's second answer (its head kept) too."""
    results = [(name, [partition])]
    expected = encode_response(correlation, build(SPEC.response_type(version),
                                                  as_dict(results, throttle, version)))
    assert encode_produce_response(correlation, version, results, throttle) == expected
    assert encode_produce_response(correlation, version, results, throttle) == expected
