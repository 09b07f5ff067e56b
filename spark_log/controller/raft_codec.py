"""The quorum's messages on the wire: raft.messages ⟷ kio's request and response entities of
Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), FetchSnapshot (59) and the KRaft Fetch
(1, see `fetch_codec`), filled as Kafka's RaftUtil and KafkaRaftClient fill them: one topic
`__cluster_metadata`, partition 0, the cluster id in every request, the responder's epoch and
leader in every answer.

Requests go out at the versions every Kafka from 3.7 on speaks (`SEND_VERSIONS`); requests and
responses are read at every version `QUORUM_API_TABLE` (and Fetch v13+) declares. A request
naming another cluster is refused with INCONSISTENT_CLUSTER_ID, one about another partition
with INVALID_REQUEST, as Kafka does (a top-level error, nothing else).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.metadata.metadata_topic import METADATA_PARTITION, METADATA_TOPIC
from spark_log.protocol import (
    ErrorCode,
    RequestHeader,
    UnsupportedRequestError,
    decode_entity,
    parse_request,
    spec_for,
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
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)

from .fetch_codec import (
    FETCH,
    FETCH_SEND_VERSION,
    FETCH_VERSIONS,
    EncodeBatches,
    fetch_request_body,
    fetch_request_fields,
    fetch_response_body,
    fetch_response_fields,
)

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH_SNAPSHOT = 52, 53, 54, 55, 59

API_KEYS: dict[type, int] = {
    VoteRequest: VOTE, VoteResponse: VOTE,
    BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH, BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: END_QUORUM_EPOCH, EndQuorumEpochResponse: END_QUORUM_EPOCH,
    FetchRequest: FETCH, FetchResponse: FETCH,
    FetchSnapshotRequest: FETCH_SNAPSHOT, FetchSnapshotResponse: FETCH_SNAPSHOT,
}
SEND_VERSIONS = {VOTE: 0, BEGIN_QUORUM_EPOCH: 0, END_QUORUM_EPOCH: 0, FETCH: FETCH_SEND_VERSION,
                 FETCH_SNAPSHOT: 0}


class QuorumWireError(ValueError):
    """A response that is not a quorum answer raft can take (a top-level error, another topic,
    an error code raft does not know): the caller drops it, and raft retries on its timeout."""


class Refused(NamedTuple):
    """A request refused before raft sees it: answer `error_response(...)` with `error`."""

    error: ErrorCode


class Inbound(NamedTuple):
    """A quorum request from replica `source`, for raft."""

    source: int
    body: Request


# ---- entity classes -------------------------------------------------------------------------
def accepts(api_key: int, version: int) -> bool:
    """Whether a quorum request of this key and version is read here."""
    if api_key == FETCH:
        return version in FETCH_VERSIONS
    spec = QUORUM_API_TABLE.get(api_key)
    return spec is not None and spec.accepts(version)


def request_type(api_key: int, version: int) -> type[RequestPayload]:
    return _spec(api_key).request_type(version)


def response_type(api_key: int, version: int) -> type[ResponsePayload]:
    return _spec(api_key).response_type(version)


def _spec(api_key: int) -> Any:
    spec = spec_for(FETCH) if api_key == FETCH else QUORUM_API_TABLE.get(api_key)
    if spec is None:
        raise ValueError(f"API key {api_key} is not a quorum API")
    return spec


def read_request(frame: bytes | memoryview) -> tuple[RequestHeader, RequestPayload]:
    """The header and kio request of a quorum request frame (without its size prefix);
    UnsupportedRequestError for another API or version, ProtocolError for bytes that do not
    decode."""
    header, body = parse_request(frame)
    if not accepts(header.api_key, header.api_version):
        raise UnsupportedRequestError(f"not a quorum request: API {header.api_key} "
                                      f"v{header.api_version}", header)
    request = decode_entity(request_type(header.api_key, header.api_version), body)
    return header, request  # type: ignore[return-value]


# ---- requests -------------------------------------------------------------------------------
def encode_request(body: Request, destination: int, cluster_id: str,
                   version: int | None = None) -> RequestPayload:
    """The kio request for `body` sent to `destination` (at `SEND_VERSIONS` unless given)."""
    api_key = API_KEYS[type(body)]
    cls = request_type(api_key, SEND_VERSIONS[api_key] if version is None else version)
    if isinstance(body, FetchRequest):
        return build(cls, fetch_request_fields(body, cluster_id))
    if isinstance(body, FetchSnapshotRequest):
        return build(cls, _fetch_snapshot_request(body, cluster_id))
    partition: dict[str, Any] = {"partition_index": METADATA_PARTITION,
                                 "voter_directory_id": None}
    if isinstance(body, VoteRequest):
        partition.update(replica_epoch=body.candidate_epoch, replica_id=body.candidate_id,
                         replica_directory_id=None, last_offset_epoch=body.last_epoch,
                         last_offset=body.last_offset, pre_vote=False)
    else:
        partition.update(leader_id=body.leader_id, leader_epoch=body.leader_epoch)
    if isinstance(body, EndQuorumEpochRequest):
        partition.update(preferred_successors=list(body.preferred_successors),
                         preferred_candidates=[{"candidate_id": s, "candidate_directory_id": None}
                                               for s in body.preferred_successors])
    return build(cls, {"cluster_id": cluster_id, "voter_id": destination, "leader_endpoints": [],
                       "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]})


def _fetch_snapshot_request(body: FetchSnapshotRequest, cluster_id: str) -> dict[str, Any]:
    partition = {"partition": METADATA_PARTITION, "current_leader_epoch": body.current_leader_epoch,
                 "snapshot_id": {"end_offset": body.snapshot_id.offset,
                                 "epoch": body.snapshot_id.epoch},
                 "position": body.position, "replica_directory_id": None}
    return {"cluster_id": cluster_id, "replica_id": body.replica_id, "max_bytes": body.max_bytes,
            "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]}


def decode_request(request: RequestPayload, cluster_id: str) -> Inbound | Refused:
    """What raft is asked, or why the request is refused before raft sees it."""
    claimed = getattr(request, "cluster_id", None)
    if claimed is not None and claimed != cluster_id:
        return Refused(ErrorCode.inconsistent_cluster_id)
    found = _request_body(request)
    return Refused(ErrorCode.invalid_request) if found is None else Inbound(*found)


def _request_body(request: Any) -> tuple[int, Request] | None:
    api_key = request.__api_key__
    if api_key == FETCH:
        return fetch_request_body(request)
    p = _single_partition(request.topics, "partitions", "topic_name", "name")
    if p is None:
        return None
    if api_key == VOTE:
        return p.replica_id, VoteRequest(p.replica_epoch, p.replica_id, p.last_offset_epoch,
                                         p.last_offset)
    if api_key == BEGIN_QUORUM_EPOCH:
        return p.leader_id, BeginQuorumEpochRequest(p.leader_epoch, p.leader_id)
    if api_key == END_QUORUM_EPOCH:
        successors = tuple(c.candidate_id for c in p.preferred_candidates) \
            if request.__version__ >= 1 else tuple(p.preferred_successors)
        return p.leader_id, EndQuorumEpochRequest(p.leader_epoch, p.leader_id, successors)
    if api_key == FETCH_SNAPSHOT:
        snapshot = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return request.replica_id, FetchSnapshotRequest(
            request.replica_id, p.current_leader_epoch, snapshot, p.position, request.max_bytes)
    return None


def _single_partition(topics: Any, partitions: str, *names: str) -> Any:
    """The one partition of a request or response about partition 0 of the metadata topic."""
    if len(topics) != 1:
        return None
    topic = topics[0]
    name = next(getattr(topic, n) for n in names if hasattr(topic, n))
    parts = getattr(topic, partitions)
    index = next((getattr(parts[0], n) for n in ("partition_index", "partition", "index")
                  if len(parts) == 1 and hasattr(parts[0], n)), None)
    return parts[0] if name == METADATA_TOPIC and index == METADATA_PARTITION else None


# ---- responses ------------------------------------------------------------------------------
def encode_response(body: Response, version: int, encode_batches: EncodeBatches
                    ) -> ResponsePayload:
    """The kio response for `body` at the version of the request it answers."""
    api_key = API_KEYS[type(body)]
    cls = response_type(api_key, version)
    if isinstance(body, FetchResponse):
        return build(cls, fetch_response_fields(body, encode_batches))
    leader = {"leader_id": body.leader_id, "leader_epoch": body.leader_epoch}
    if isinstance(body, FetchSnapshotResponse):
        snapshot = body.snapshot_id or OffsetAndEpoch(-1, -1)
        partition = {"index": METADATA_PARTITION, "error_code": int(body.error),
                     "snapshot_id": {"end_offset": snapshot.offset, "epoch": snapshot.epoch},
                     "current_leader": leader, "size": body.size, "position": body.position,
                     "unaligned_records": body.data}
        return build(cls, {"throttle_time": 0, "error_code": 0, "node_endpoints": [],
                           "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]})
    partition = {"partition_index": METADATA_PARTITION, "error_code": int(body.error), **leader}
    if isinstance(body, VoteResponse):
        partition["vote_granted"] = body.vote_granted
    return build(cls, {"error_code": 0, "node_endpoints": [],
                       "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]})


def decode_response(response: ResponsePayload) -> Response:
    """raft's response; QuorumWireError if it cannot be one."""
    api_key = response.__api_key__
    try:
        if api_key == FETCH:
            return fetch_response_body(response)
        if response.error_code != 0:
            raise ValueError(f"top-level error {response.error_code.name}")
        return _partition_response(api_key, response)
    except ValueError as e:
        raise QuorumWireError(f"{type(response).__name__} v{response.__version__}: {e}") from None


def _partition_response(api_key: int, response: Any) -> Response:
    p = _single_partition(response.topics, "partitions", "topic_name", "name")
    if p is None:
        raise ValueError("not an answer about the metadata partition")
    error = Error(int(p.error_code))  # ValueError for a code raft does not know
    if api_key == FETCH_SNAPSHOT:
        leader = p.current_leader
        snapshot = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return FetchSnapshotResponse(error, leader.leader_epoch, leader.leader_id,
                                     None if snapshot == (-1, -1) else snapshot, p.size,
                                     p.position, bytes(p.unaligned_records))
    if api_key == VOTE:
        return VoteResponse(error, p.leader_epoch, p.leader_id, p.vote_granted)
    if api_key == BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochResponse(error, p.leader_epoch, p.leader_id)
    return EndQuorumEpochResponse(error, p.leader_epoch, p.leader_id)


def error_response(api_key: int, version: int, error: ErrorCode) -> ResponsePayload:
    """A response carrying only a top-level error, as Kafka's RaftUtil.errorResponse."""
    fields: dict[str, Any] = {"error_code": int(error), "topics": [], "responses": [],
                              "throttle_time": 0, "node_endpoints": [], "error_message": None,
                              "nodes": []}
    return build(response_type(api_key, version), fields)
