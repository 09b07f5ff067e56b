"""DescribeQuorum (api key 55): what the leader knows of every voter and observer — its log end
offset, when it last fetched and when it was last caught up — as Kafka's LeaderState tracks it
and RaftUtil.singletonDescribeQuorumResponse writes it.

`FetchTimes` follows the fetches a leader answers (Kafka's ReplicaState.updateFollowerState): a
replica is caught up at a fetch that reaches the leader's log end offset, or at its previous
fetch if this one reaches the end the leader had then. Times are wall-clock milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.metadata.metadata_topic import METADATA_PARTITION, METADATA_TOPIC
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_table import QUORUM_API_TABLE
from spark_log.protocol.entity_build import build

DESCRIBE_QUORUM = 55
OBSERVER_SESSION_MS = 300_000  # Kafka forgets observers that have not fetched for this long


@dataclass(frozen=True)
class ReplicaDescription:
    replica_id: int
    log_end_offset: int  # -1: not known
    last_fetch_ms: int  # -1: never
    last_caught_up_ms: int  # -1: never


@dataclass(frozen=True)
class QuorumDescription:
    """The quorum as its leader sees it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


@dataclass
class _Times:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_fetch_leader_end: int = -1
    last_caught_up_ms: int = -1


@dataclass
class FetchTimes:
    """The fetches answered in one leader epoch. Not thread-safe."""

    epoch: int = -1
    _replicas: dict[int, _Times] = field(default_factory=dict)

    def start_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._replicas = epoch, {}

    def fetched(self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        t = self._replicas.setdefault(replica_id, _Times())
        if fetch_offset >= leader_end:
            t.last_caught_up_ms = max(t.last_caught_up_ms, now_ms)
        elif t.last_fetch_leader_end > 0 and fetch_offset >= t.last_fetch_leader_end:
            t.last_caught_up_ms = max(t.last_caught_up_ms, t.last_fetch_ms)
        t.last_fetch_leader_end = leader_end
        t.last_fetch_ms = max(t.last_fetch_ms, now_ms)
        t.end_offset = fetch_offset

    def describe(self, leader_id: int, high_watermark: int, leader_end: int,
                 voters: frozenset[int], now_ms: int) -> QuorumDescription:
        def one(replica_id: int) -> ReplicaDescription:
            if replica_id == leader_id:
                return ReplicaDescription(replica_id, leader_end, now_ms, now_ms)
            t = self._replicas.get(replica_id, _Times())
            return ReplicaDescription(replica_id, t.end_offset, t.last_fetch_ms,
                                      t.last_caught_up_ms)

        observers = sorted(r for r, t in self._replicas.items() if r not in voters and
                           now_ms - t.last_fetch_ms <= OBSERVER_SESSION_MS)
        return QuorumDescription(leader_id, self.epoch, high_watermark,
                                 tuple(one(v) for v in sorted(voters)),
                                 tuple(one(o) for o in observers))


def is_metadata_partition(request: RequestPayload) -> bool:
    topics = getattr(request, "topics", ())
    return len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC and \
        [p.partition_index for p in topics[0].partitions] == [METADATA_PARTITION]


def describe_quorum_response(request: RequestPayload, described: QuorumDescription | None, *,
                             epoch: int, leader_id: int,
                             endpoints: dict[int, tuple[str, str, int]]) -> ResponsePayload:
    """The answer to `request` (a DescribeQuorumRequest): the description when this replica
    leads (`described`), else NOT_LEADER_OR_FOLLOWER with the epoch and leader it knows;
    UNKNOWN_TOPIC_OR_PARTITION for anything but the metadata partition. `endpoints` are the
    voters' (listener name, host, port), listed from v2."""
    response_cls = QUORUM_API_TABLE[DESCRIBE_QUORUM].response_type(request.__version__)
    if not is_metadata_partition(request):
        topics = [{"topic_name": t.topic_name, "partitions": [
            _error_partition(p.partition_index, ErrorCode.unknown_topic_or_partition, -1, -1)
            for p in t.partitions]} for t in request.topics]
        return build(response_cls, {"error_code": 0, "error_message": None, "topics": topics,
                                    "nodes": []})
    if described is None:
        partition = _error_partition(METADATA_PARTITION, ErrorCode.not_leader_or_follower,
                                     leader_id, epoch)
        nodes: list[dict[str, Any]] = []
    else:
        partition = {"partition_index": METADATA_PARTITION, "error_code": 0,
                     "error_message": None, "leader_id": described.leader_id,
                     "leader_epoch": described.leader_epoch,
                     "high_watermark": described.high_watermark,
                     "current_voters": [_replica(r) for r in described.voters],
                     "observers": [_replica(r) for r in described.observers]}
        nodes = [{"node_id": v.replica_id, "listeners": [
            {"name": endpoints[v.replica_id][0], "host": endpoints[v.replica_id][1],
             "port": endpoints[v.replica_id][2]}]}
            for v in described.voters if v.replica_id in endpoints]
    return build(response_cls, {"error_code": 0, "error_message": None, "nodes": nodes,
                                "topics": [{"topic_name": METADATA_TOPIC,
                                            "partitions": [partition]}]})


def _error_partition(index: int, error: ErrorCode, leader_id: int, epoch: int
                     ) -> dict[str, Any]:
    message = "this replica does not lead the quorum" \
        if error == ErrorCode.not_leader_or_follower else "not the metadata partition"
    return {"partition_index": index, "error_code": int(error), "error_message": message,
            "leader_id": leader_id, "leader_epoch": epoch, "high_watermark": -1,
            "current_voters": [], "observers": []}


def _replica(r: ReplicaDescription) -> dict[str, Any]:
    return {"replica_id": r.replica_id, "replica_directory_id": None,
            "log_end_offset": r.log_end_offset, "last_fetch_timestamp": r.last_fetch_ms,
            "last_caught_up_timestamp": r.last_caught_up_ms}
