"""The quorum's messages (KIP-595): Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot requests and responses, and the batches the log is made of.

These are the fields the protocol needs, independent of their wire encoding: the broker turns
them into Kafka's request and response schemas and back; the simulator passes them as they are.
Error codes are Kafka's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple


class Error(IntEnum):
    """The Kafka error codes the quorum answers with."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99


NO_LEADER = -1


class OffsetAndEpoch(NamedTuple):
    """An end offset and the epoch of the record before it: how logs are compared, where they
    diverge, and what a snapshot covers."""

    offset: int
    epoch: int


@dataclass(frozen=True)
class Batch:
    """Records appended together by a leader of `epoch`, at offsets base_offset.. (one each).
    A control batch (the leader's epoch-start marker) is replicated and committed but carries
    nothing for the application."""

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: bool = False

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    def size(self) -> int:
        return sum(len(r) for r in self.records) + 16 * len(self.records)


# ---- requests -----------------------------------------------------------------------------

@dataclass(frozen=True)
class VoteRequest:
    candidate_epoch: int
    candidate_id: int
    last_epoch: int  # of the candidate's last record
    last_offset: int  # the candidate's log end offset


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int  # the fetcher's log end offset, flushed if it is a voter
    last_fetched_epoch: int  # the epoch of the record before fetch_offset
    max_wait_ms: int


@dataclass(frozen=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest |
           FetchSnapshotRequest)


# ---- responses: each tells the requester the responder's epoch and leader -----------------

@dataclass(frozen=True)
class VoteResponse:
    error: Error
    leader_epoch: int
    leader_id: int
    vote_granted: bool


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    error: Error
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    error: Error
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True)
class FetchResponse:
    error: Error
    leader_epoch: int
    leader_id: int
    high_watermark: int = -1
    log_start_offset: int = -1
    batches: tuple[Batch, ...] = ()
    diverging: OffsetAndEpoch | None = None  # truncate to this before fetching again
    snapshot_id: OffsetAndEpoch | None = None  # fetch this snapshot instead


@dataclass(frozen=True)
class FetchSnapshotResponse:
    error: Error
    leader_epoch: int
    leader_id: int
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    data: bytes = b""


Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse |
            FetchSnapshotResponse)


@dataclass(frozen=True)
class Message:
    """One RPC between replicas. A response carries its request's correlation id, so a late or
    duplicated response is recognised and dropped."""

    source: int
    destination: int
    correlation_id: int
    body: Request | Response = field(repr=True)

    @property
    def is_request(self) -> bool:
        return isinstance(self.body, (VoteRequest, BeginQuorumEpochRequest,
                                      EndQuorumEpochRequest, FetchRequest,
                                      FetchSnapshotRequest))
