"""What a leader tracks of its replicas (Kafka's LeaderState): how far each voter has made the
log durable, who has fetched lately, and from that the high watermark and whether the leader
still has a quorum behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Message


@dataclass
class ParkedFetch:
    """A fetch that found nothing new, held until records come, the HW moves, or `deadline`."""

    message: Message
    deadline: int


@dataclass
class ReplicaProgress:
    end_offset: int = -1  # the last fetch offset it sent: durable up to there (voters)
    last_fetch_ms: int = -1
    high_watermark_sent: int = -1  # what its last fetch response told it


@dataclass
class LeaderState:
    """Invariants: the high watermark only grows, is -1 until a record of this epoch is
    committed (Raft's rule: a leader exposes records of earlier epochs only once one of its own
    is committed), and never exceeds what a majority of voters (the leader counting with its
    flushed end) has made durable."""

    node_id: int
    epoch_start_offset: int
    voters: frozenset[int]
    check_quorum_deadline: int
    high_watermark: int = -1
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    begin_acked: set[int] = field(default_factory=set)  # voters that know this epoch's leader
    _fetched: set[int] = field(default_factory=set)  # voters heard from this check interval

    def replica(self, replica_id: int) -> ReplicaProgress:
        found = self.progress.get(replica_id)
        if found is None:
            found = self.progress[replica_id] = ReplicaProgress()
        return found

    def update_local(self, flushed_end: int) -> bool:
        """The leader's own log is durable up to `flushed_end`; True if the HW moved."""
        self.replica(self.node_id).end_offset = flushed_end
        return self._maybe_advance()

    def update_replica(self, replica_id: int, fetch_offset: int, now_ms: int,
                       check_quorum_ms: int) -> bool:
        """A fetch from `replica_id` at `fetch_offset`; True if the HW moved."""
        progress = self.replica(replica_id)
        progress.last_fetch_ms = now_ms
        if replica_id not in self.voters:
            return False
        self.begin_acked.add(replica_id)
        self._fetched.add(replica_id)
        if len(self._fetched | {self.node_id}) >= len(self.voters) // 2 + 1:
            self.check_quorum_deadline = now_ms + check_quorum_ms
            self._fetched.clear()
        progress.end_offset = fetch_offset  # the latest word, even if lower (never trusted more)
        return self._maybe_advance()

    def _maybe_advance(self) -> bool:
        ends = sorted((self.replica(v).end_offset for v in self.voters), reverse=True)
        candidate = ends[len(self.voters) // 2]  # durable on a majority
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def has_quorum(self, now_ms: int) -> bool:
        """False once no majority of voters fetched within the check-quorum timeout."""
        return len(self.voters) == 1 or now_ms < self.check_quorum_deadline

    def voters_by_end_offset(self) -> list[int]:
        """The other voters, most up to date first: the successors a resigning leader names."""
        others = [v for v in self.voters if v != self.node_id]
        return sorted(others, key=lambda v: (-self.replica(v).end_offset, v))
