"""What `spark-log metadata-quorum describe` prints, from a DescribeQuorum answer's metadata
partition (any version: v0 has no fetch times, v2 adds directory ids and the voters'
endpoints). Pure: no I/O, so the output is tested from built entities.

`--status` is kafka-metadata-quorum.sh's summary: the leader and its epoch, the high
watermark, how far the furthest-behind voter is (MaxFollowerLag, in offsets, and
MaxFollowerLagTimeMs, the leader's last caught-up time minus that voter's; 0 when the leader
itself is furthest behind, -1 when a time is unknown), and the voters and observers with their
endpoints. `--replication` is one row per replica: the leader, the other voters (Follower),
then the observers, with each one's log end offset and lag behind the leader's.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KEY_WIDTH = 24  # kafka-metadata-quorum.sh aligns the values of --status here
UNKNOWN = -1
REPLICATION_HEADERS = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status")
Endpoints = Mapping[int, Sequence[tuple[str, str, int]]]


@dataclass(frozen=True)
class Replica:
    node_id: int
    directory_id: str | None  # Kafka's form (URL-safe base64); None when not known
    log_end_offset: int  # -1: not known to the leader
    last_fetch_ms: int | None
    last_caught_up_ms: int | None
    endpoints: tuple[str, ...]  # NAME://host:port


@dataclass(frozen=True)
class QuorumView:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]
    has_directory_ids: bool

    @property
    def leader(self) -> Replica | None:
        return next((v for v in self.voters if v.node_id == self.leader_id), None)

    def max_follower_lag(self) -> tuple[int, int]:
        """(MaxFollowerLag, MaxFollowerLagTimeMs) as Kafka computes them."""
        leader = self.leader
        if leader is None or not self.voters:
            return UNKNOWN, UNKNOWN
        furthest = min(self.voters, key=lambda v: v.log_end_offset)  # the first of equals
        lag = leader.log_end_offset - furthest.log_end_offset
        if furthest is leader:
            return lag, 0
        if leader.last_caught_up_ms is None or furthest.last_caught_up_ms is None:
            return lag, UNKNOWN
        return lag, leader.last_caught_up_ms - furthest.last_caught_up_ms


def quorum_view(partition: Any, endpoints: Endpoints, version: int) -> QuorumView:
    """The view of a described metadata partition (kio DescribeQuorum PartitionData)."""
    def replicas(states: Sequence[Any]) -> tuple[Replica, ...]:
        return tuple(_replica(s, endpoints) for s in states)

    return QuorumView(int(partition.leader_id), int(partition.leader_epoch),
                      int(partition.high_watermark), replicas(partition.current_voters),
                      replicas(partition.observers), has_directory_ids=version >= 2)


def _replica(state: Any, endpoints: Endpoints) -> Replica:
    node_id = int(state.replica_id)
    return Replica(
        node_id, kafka_uuid(getattr(state, "replica_directory_id", None)),
        int(state.log_end_offset), _time(getattr(state, "last_fetch_timestamp", UNKNOWN)),
        _time(getattr(state, "last_caught_up_timestamp", UNKNOWN)),
        tuple(_endpoint(*e) for e in endpoints.get(node_id, ())))


def kafka_uuid(value: uuid.UUID | None) -> str | None:
    """A UUID as Kafka prints it (22 characters of URL-safe base64); the zero UUID, Kafka's
    "none", as None."""
    if value is None or value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _time(ms: int) -> int | None:
    return None if ms < 0 else int(ms)


def _endpoint(name: str, host: str, port: int) -> str:
    return f"{name}://{f'[{host}]' if ':' in host else host}:{port}"


# ---- --status -----------------------------------------------------------------------------

def status_pairs(view: QuorumView, cluster_id: str | None) -> list[tuple[str, str]]:
    lag, lag_ms = view.max_follower_lag()
    return [("ClusterId", cluster_id or "unknown"), ("LeaderId", str(view.leader_id)),
            ("LeaderEpoch", str(view.leader_epoch)),
            ("HighWatermark", str(view.high_watermark)), ("MaxFollowerLag", str(lag)),
            ("MaxFollowerLagTimeMs", str(lag_ms)),
            ("CurrentVoters", _replica_list(view.voters)),
            ("CurrentObservers", _replica_list(view.observers))]


def status_lines(view: QuorumView, cluster_id: str | None) -> list[str]:
    """`Key:` padded to Kafka's column, then the value."""
    return [f"{key + ':':<{KEY_WIDTH}}{value}" for key, value in status_pairs(view, cluster_id)]


def _replica_list(replicas: Sequence[Replica]) -> str:
    """[{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://host:9093"]}, ...]"""
    items = []
    for r in replicas:
        item = f'{{"id": {r.node_id}, "directoryId": {json.dumps(r.directory_id)}'
        if r.endpoints:
            item += ', "endpoints": [' + ", ".join(json.dumps(e) for e in r.endpoints) + "]"
        items.append(item + "}")
    return "[" + ", ".join(items) + "]"


def status_json(view: QuorumView, cluster_id: str | None) -> dict[str, Any]:
    lag, lag_ms = view.max_follower_lag()
    return {"cluster_id": cluster_id, "leader_id": view.leader_id,
            "leader_epoch": view.leader_epoch, "high_watermark": view.high_watermark,
            "max_follower_lag": lag, "max_follower_lag_time_ms": lag_ms,
            "current_voters": [_replica_json(r) for r in view.voters],
            "current_observers": [_replica_json(r) for r in view.observers]}


def _replica_json(r: Replica) -> dict[str, Any]:
    return {"id": r.node_id, "directory_id": r.directory_id, "endpoints": list(r.endpoints)}


# ---- --replication ------------------------------------------------------------------------

def replication(view: QuorumView) -> list[tuple[Replica, int, str]]:
    """(replica, lag, status): the leader first, then the other voters, then the observers."""
    leader = view.leader
    leader_end = leader.log_end_offset if leader is not None else UNKNOWN
    ordered = [(r, "Leader") for r in view.voters if r is leader]
    ordered += [(r, "Follower") for r in view.voters if r is not leader]
    ordered += [(r, "Observer") for r in view.observers]
    return [(r, leader_end - r.log_end_offset, status) for r, status in ordered]


def replication_table(view: QuorumView, human_readable: bool, now_ms: int
                      ) -> tuple[tuple[str, ...], list[list[str | int | None]]]:
    """Headers and rows; DirectoryId only when the answer carries directory ids (v2). Times
    are epoch milliseconds, or `N ms ago` when human-readable; -1 when unknown."""
    headers = REPLICATION_HEADERS if view.has_directory_ids else tuple(
        h for h in REPLICATION_HEADERS if h != "DirectoryId")
    rows: list[list[str | int | None]] = []
    for r, lag, status in replication(view):
        row: list[str | int | None] = [r.node_id]
        if view.has_directory_ids:
            row.append(r.directory_id)
        row += [r.log_end_offset, lag, _when(r.last_fetch_ms, human_readable, now_ms),
                _when(r.last_caught_up_ms, human_readable, now_ms), status]
        rows.append(row)
    return headers, rows


def _when(ms: int | None, human_readable: bool, now_ms: int) -> str:
    if ms is None:
        return str(UNKNOWN)
    return f"{max(0, now_ms - ms)} ms ago" if human_readable else str(ms)


def replication_json(view: QuorumView) -> list[dict[str, Any]]:
    return [{"node_id": r.node_id, "directory_id": r.directory_id,
             "log_end_offset": r.log_end_offset, "lag": lag,
             "last_fetch_timestamp": r.last_fetch_ms,
             "last_caught_up_timestamp": r.last_caught_up_ms, "status": status}
            for r, lag, status in replication(view)]
