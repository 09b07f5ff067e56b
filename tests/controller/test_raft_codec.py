"""The quorum's messages through kio's encoder and decoder and back, at every version read here;
the fields Kafka's raft reads where it reads them; refusals of another cluster's requests."""

from __future__ import annotations

import pytest

from spark_log.controller import raft_codec as rc
from spark_log.controller.batch_codec import LeaderChanges, encode_batches
from spark_log.controller.fetch_codec import METADATA_TOPIC_ID
from spark_log.controller.quorum_description import (
    FetchTimes,
    QuorumDescription,
    ReplicaDescription,
    describe_quorum_response,
)
from spark_log.protocol import (
    ErrorCode,
    decode_entity,
    encode_entity,
    encode_request,
    encode_response,
)
from spark_log.protocol.api_table import QUORUM_API_TABLE
from spark_log.protocol.entity_build import build
from spark_log.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Error,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    OffsetAndEpoch,
    VoteRequest,
    VoteResponse,
)

from .support import data_batch, epoch_start

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
LEADER_CHANGES = LeaderChanges(1, frozenset({1, 2, 3}))

REQUESTS = [
    VoteRequest(candidate_epoch=7, candidate_id=2, last_epoch=6, last_offset=120),
    BeginQuorumEpochRequest(leader_epoch=7, leader_id=2),
    EndQuorumEpochRequest(leader_epoch=7, leader_id=2, preferred_successors=(3, 1)),
    FetchRequest(replica_id=3, current_leader_epoch=7, fetch_offset=120, last_fetched_epoch=6,
                 max_wait_ms=500),
    FetchSnapshotRequest(replica_id=3, current_leader_epoch=7,
                         snapshot_id=OffsetAndEpoch(100, 5), position=4096, max_bytes=1 << 20),
]
BATCHES = (epoch_start(120, 7), data_batch(121, 7, b"a", b"bc"))
RESPONSES = [
    VoteResponse(Error.NONE, leader_epoch=7, leader_id=-1, vote_granted=True),
    VoteResponse(Error.FENCED_LEADER_EPOCH, leader_epoch=8, leader_id=1, vote_granted=False),
    BeginQuorumEpochResponse(Error.NONE, leader_epoch=7, leader_id=2),
    EndQuorumEpochResponse(Error.NOT_LEADER_OR_FOLLOWER, leader_epoch=7, leader_id=2),
    FetchResponse(Error.NONE, 7, 2, high_watermark=121, log_start_offset=100),
    FetchResponse(Error.NONE, 7, 2, 121, 100, diverging=OffsetAndEpoch(90, 4)),
    FetchResponse(Error.NONE, 7, 2, 121, 100, snapshot_id=OffsetAndEpoch(100, 5)),
    FetchResponse(Error.FENCED_LEADER_EPOCH, 8, 3),
    FetchSnapshotResponse(Error.NONE, 7, 2, OffsetAndEpoch(100, 5), size=9000, position=4096,
                          data=b"chunk"),
    FetchSnapshotResponse(Error.SNAPSHOT_NOT_FOUND, 7, 2),
]


def versions(api_key: int) -> list[int]:
    if api_key == rc.FETCH:
        return list(rc.FETCH_VERSIONS)
    spec = QUORUM_API_TABLE[api_key]
    return list(range(spec.min_version, spec.max_version + 1))


def through_the_wire(entity):  # type: ignore[no-untyped-def]
    return decode_entity(type(entity), encode_entity(entity))


def cases(messages: list) -> list:  # type: ignore[type-arg]
    return [pytest.param(m, v, id=f"{type(m).__name__}-v{v}")
            for m in messages for v in versions(rc.API_KEYS[type(m)])]


@pytest.mark.parametrize(("body", "version"), cases(REQUESTS))
def test_every_request_survives_kios_encoder_and_decoder(body, version) -> None:  # type: ignore
    entity = through_the_wire(rc.encode_request(body, 1, CLUSTER, version))
    assert (entity.__api_key__, entity.__version__) == (rc.API_KEYS[type(body)], version)
    assert entity.cluster_id == CLUSTER
    sender = {VoteRequest: 2, BeginQuorumEpochRequest: 2, EndQuorumEpochRequest: 2,
              FetchRequest: 3, FetchSnapshotRequest: 3}[type(body)]
    assert rc.decode_request(entity, CLUSTER) == rc.Inbound(sender, body)


@pytest.mark.parametrize(("body", "version"), cases(RESPONSES))
def test_every_response_survives_kios_encoder_and_decoder(body, version) -> None:  # type: ignore
    entity = through_the_wire(rc.encode_response(body, version, lambda b: b""))
    assert rc.decode_response(entity) == body


@pytest.mark.parametrize("version", list(rc.FETCH_VERSIONS))
def test_a_fetch_response_carries_the_batches_as_record_batches(version: int) -> None:
    body = FetchResponse(Error.NONE, 7, 1, 121, 0, BATCHES)
    encode = lambda b: encode_batches(b, 1_700_000_000_000, LEADER_CHANGES)  # noqa: E731
    entity = through_the_wire(rc.encode_response(body, version, encode))
    decoded = rc.decode_response(entity)
    assert isinstance(decoded, FetchResponse)
    assert [(b.base_offset, b.epoch, b.control) for b in decoded.batches] == \
        [(120, 7, True), (121, 7, False)]
    assert decoded.batches[1].records == (b"a", b"bc")
    assert decoded.batches[0].records == (LEADER_CHANGES.value(7),)  # the message, not a mark


def test_a_fetch_names_the_metadata_topic_by_its_id_and_the_fetcher_where_kafka_reads_it() -> None:
    body = REQUESTS[3]
    old = rc.encode_request(body, 1, CLUSTER, 14)
    new = rc.encode_request(body, 1, CLUSTER, 15)
    assert old.replica_id == 3 and new.replica_state.replica_id == 3
    assert str(METADATA_TOPIC_ID) == "00000000-0000-0000-0000-000000000001"
    for entity in (old, new):
        (topic,) = entity.topics
        (partition,) = topic.partitions
        assert topic.topic_id == METADATA_TOPIC_ID and partition.partition == 0
        assert (partition.fetch_offset, partition.last_fetched_epoch,
                partition.current_leader_epoch) == (120, 6, 7)


def test_requests_go_out_at_versions_every_kafka_since_3_7_reads() -> None:
    sent = {rc.API_KEYS[type(b)]: rc.encode_request(b, 1, CLUSTER).__version__ for b in REQUESTS}
    assert sent == {52: 0, 53: 0, 54: 0, 1: 16, 59: 0}


@pytest.mark.parametrize(("body", "version"), cases(REQUESTS))
def test_a_request_from_another_cluster_is_refused(body, version) -> None:  # type: ignore
    entity = through_the_wire(rc.encode_request(body, 1, "another-cluster", version))
    refused = rc.decode_request(entity, CLUSTER)
    assert refused == rc.Refused(ErrorCode.inconsistent_cluster_id)
    api_key = rc.API_KEYS[type(body)]
    answer = through_the_wire(rc.error_response(api_key, version, refused.error))
    assert answer.error_code == ErrorCode.inconsistent_cluster_id
    with pytest.raises(rc.QuorumWireError, match="inconsistent_cluster_id"):
        rc.decode_response(answer)


def test_a_request_without_a_cluster_id_is_taken_as_kafka_does() -> None:
    entity = build(rc.request_type(52, 0), {
        "cluster_id": None, "topics": [{"topic_name": "__cluster_metadata", "partitions": [
            {"partition_index": 0, "replica_epoch": 3, "replica_id": 2, "last_offset_epoch": 1,
             "last_offset": 10}]}]})
    assert rc.decode_request(through_the_wire(entity), CLUSTER) == \
        rc.Inbound(2, VoteRequest(3, 2, 1, 10))


@pytest.mark.parametrize("topic", ["other-topic", "__cluster_metadata:1"])
def test_a_request_about_another_partition_is_invalid(topic: str) -> None:
    name, _, index = topic.partition(":")
    entity = build(rc.request_type(53, 0), {"cluster_id": CLUSTER, "topics": [
        {"topic_name": name, "partitions": [{"partition_index": int(index or 0),
                                             "leader_id": 1, "leader_epoch": 2}]}]})
    assert rc.decode_request(entity, CLUSTER) == rc.Refused(ErrorCode.invalid_request)


def test_a_fetch_with_a_last_epoch_past_its_leader_epoch_is_invalid() -> None:
    bad = FetchRequest(3, current_leader_epoch=4, fetch_offset=10, last_fetched_epoch=5,
                       max_wait_ms=0)
    entity = rc.encode_request(bad, 1, CLUSTER)
    assert rc.decode_request(entity, CLUSTER) == rc.Refused(ErrorCode.invalid_request)


def test_a_framed_quorum_request_is_read_back() -> None:
    frame = encode_request(9, "raft-client-2", rc.encode_request(REQUESTS[0], 1, CLUSTER))
    header, request = rc.read_request(memoryview(frame)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (52, 0, 9, "raft-client-2")
    assert rc.decode_request(request, CLUSTER) == rc.Inbound(2, REQUESTS[0])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_lists_the_leaders_view(version: int) -> None:
    times = FetchTimes()
    times.start_epoch(7)
    times.fetched(2, fetch_offset=100, leader_end=120, now_ms=1000)  # behind
    times.fetched(2, fetch_offset=120, leader_end=125, now_ms=1500)  # reached the last end
    times.fetched(9, fetch_offset=125, leader_end=125, now_ms=1600)  # an observer, caught up
    described = times.describe(1, 121, 125, frozenset({1, 2, 3}), now_ms=2000)
    assert described == QuorumDescription(1, 7, 121, (
        ReplicaDescription(1, 125, 2000, 2000), ReplicaDescription(2, 120, 1500, 1000),
        ReplicaDescription(3, -1, -1, -1)), (ReplicaDescription(9, 125, 1600, 1600),))
    request = build(QUORUM_API_TABLE[55].request_type(version), {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    endpoints = {1: ("CONTROLLER", "h1", 9093), 2: ("CONTROLLER", "h2", 9093)}
    answer = through_the_wire(describe_quorum_response(request, described, epoch=7, leader_id=1,
                                                       endpoints=endpoints))
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch,
            partition.high_watermark) == (ErrorCode.none, 1, 7, 121)
    assert [(v.replica_id, v.log_end_offset) for v in partition.current_voters] == \
        [(1, 125), (2, 120), (3, -1)]
    assert [o.replica_id for o in partition.observers] == [9]
    if version >= 1:
        assert partition.current_voters[1].last_caught_up_timestamp == 1000
    if version >= 2:
        assert [(n.node_id, n.listeners[0].host) for n in answer.nodes] == [(1, "h1"), (2, "h2")]
    assert encode_response(1, answer)  # frames as any response


def test_describe_quorum_on_a_follower_names_what_it_knows() -> None:
    request = build(QUORUM_API_TABLE[55].request_type(1), {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    answer = describe_quorum_response(request, None, epoch=7, leader_id=2, endpoints={})
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch) == \
        (ErrorCode.not_leader_or_follower, 2, 7)
    other = build(type(request), {"topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 3}]}]})
    answer = describe_quorum_response(other, None, epoch=7, leader_id=2, endpoints={})
    assert answer.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
