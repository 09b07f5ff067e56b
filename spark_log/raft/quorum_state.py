"""Where a replica stands in its epoch (Kafka's QuorumState and its EpochState classes): not
attached to a leader (possibly having voted), a candidate, a follower, the leader, or a leader
that resigned.

Each state knows its epoch and what the replica may do in it; the transitions between them, and
persisting the election state they imply, belong to `RaftReplica`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .leader_state import LeaderState
from .messages import NO_LEADER, OffsetAndEpoch


class QuorumSafetyError(AssertionError):
    """Something Raft rules out happened (two leaders in an epoch, truncating committed
    records): the replica stops rather than go on with a log it cannot trust."""


@dataclass
class Unattached:
    """No leader known in `epoch`. A voter that voted in it (`voted_id`) may not vote for
    anyone else in it; at `election_deadline` a voter becomes a candidate."""

    epoch: int
    election_deadline: int
    voted_id: int = NO_LEADER

    @property
    def leader_id(self) -> int:
        return NO_LEADER


@dataclass
class Candidate:
    """Asking for votes in `epoch` (having voted for itself). Past `election_deadline` without a
    majority it backs off until `backoff_until`, then stands again in the next epoch."""

    epoch: int
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None

    @property
    def leader_id(self) -> int:
        return NO_LEADER


@dataclass
class SnapshotFetch:
    """A snapshot being fetched from the leader, chunk by chunk."""

    snapshot_id: OffsetAndEpoch
    data: bytearray = field(default_factory=bytearray)
    size: int = -1


@dataclass
class Follower:
    """Following `leader_id` in `epoch`. Without a fetch answered by then, at `fetch_deadline`
    a voter stands for election and an observer looks for the leader again."""

    epoch: int
    leader_id: int
    fetch_deadline: int
    voted_id: int = NO_LEADER
    snapshot: SnapshotFetch | None = None


@dataclass
class Leader:
    """Leading `epoch`: appends, and commits what a majority of voters has made durable."""

    epoch: int
    progress: LeaderState

    @property
    def leader_id(self) -> int:
        return self.progress.node_id


@dataclass
class Resigned:
    """Led `epoch` and stepped down (shutting down, or cut off from a majority); appends are
    refused. At `election_deadline` it stands again in the next epoch."""

    epoch: int
    node_id: int
    election_deadline: int

    @property
    def leader_id(self) -> int:
        return self.node_id


EpochState = Unattached | Candidate | Follower | Leader | Resigned
