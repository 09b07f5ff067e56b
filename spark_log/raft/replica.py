"""One member of the controller quorum (Kafka's KafkaRaftClient), voter or observer, as a pure
state machine: `tick`, `receive`, `propose`, `take_snapshot` and `resign` take the time in and
return the actions to carry out (see `actions`).

Elections (KIP-595): a voter that hears nothing from a leader for `fetch_timeout_ms` (or has no
leader for `election_timeout_ms` plus jitter) stands as candidate in the next epoch, voting for
itself; a voter grants one vote per epoch, to a candidate whose log is at least as up to date as
its own. The winner appends an epoch-start control batch and announces itself with
BeginQuorumEpoch. Replication is pull-based: followers fetch from the leader, sending the end
of their flushed log and the epoch of its last record; the leader answers with batches, or with
the point where the logs diverge (the follower truncates there), or with a snapshot to fetch
first. The leader commits an offset once a majority of voters has made it durable and a record
of its own epoch is among them.
"""

from __future__ import annotations

from collections.abc import Iterable

from .actions import (
    Action,
    AppendBatches,
    Commit,
    FlushLog,
    LeaderChange,
    PersistElection,
    SaveSnapshot,
    Send,
)
from .config import QuorumConfig, Random
from .election_state import ElectionState
from .leader_state import LeaderState, ParkedFetch
from .messages import (
    NO_LEADER,
    Batch,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    OffsetAndEpoch,
    Request,
    Response,
    VoteRequest,
)
from .quorum_state import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    QuorumSafetyError,
    Resigned,
    Unattached,
)
from .replica_handlers import ReplicaHandlers
from .replicated_log import ReplicatedLog
from .requests import RequestManager

LEADER_CHANGE_RECORD = b"leader-change"
NEVER = 1 << 62


class RaftReplica(ReplicaHandlers):
    """Invariants: the epoch never decreases and every change of it, of the known leader or of
    the vote is persisted (an action) before any message that reveals it; at most one vote per
    epoch; a leader only appends in its own epoch; the high watermark never decreases and never
    exceeds the log end. Not thread-safe: its driver calls it from one thread."""

    def __init__(self, node_id: int, config: QuorumConfig, election: ElectionState,
                 log: ReplicatedLog, snapshot_data: bytes | None, now_ms: int,
                 rng: Random, *, correlation_ids_after: int = 0) -> None:
        self.node_id, self.config, self.log, self.rng = node_id, config, log, rng
        self.is_voter = node_id in config.voters
        self.snapshot_data = snapshot_data  # of log.snapshot_id, served to fetchers
        self.high_watermark = log.start_offset  # a snapshot only holds committed records
        # (A restarted process talks over new connections, so answers to its previous instance
        # never reach it; a simulator keeping one network starts each instance's ids higher.)
        self.requests = RequestManager(config.request_timeout_ms, correlation_ids_after)
        self._parked: dict[int, ParkedFetch] = {}
        self._out: list[Action] = []
        self.state: EpochState = self._initial_state(election, now_ms)

    def _initial_state(self, election: ElectionState, now: int) -> EpochState:
        if self.config.voters == {self.node_id}:  # its own quorum: stand at once, no one to wait
            voted = self.node_id if election.leader_id == self.node_id else election.voted_id
            return Unattached(election.epoch, now, voted)
        if election.leader_id == self.node_id:  # led before the restart: never vote again in it
            return Unattached(election.epoch, self._election_deadline(now), self.node_id)
        if election.leader_id != NO_LEADER:
            return Follower(election.epoch, election.leader_id,
                            now + self.config.fetch_timeout_ms, election.voted_id)
        return Unattached(election.epoch, self._election_deadline(now), election.voted_id)

    # ---- what others see ----------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, Leader)

    def next_deadline(self) -> int:
        """When `tick` next has work to do (-1: at once; NEVER: only after another event)."""
        s = self.state
        deadlines = [self.requests.next_deadline(), *(p.deadline for p in self._parked.values())]
        if isinstance(s, Unattached):
            if self.is_voter:
                deadlines.append(s.election_deadline)
            elif not self.requests.pending_any(FetchRequest):
                return -1  # an observer with no leader and no question out: ask now
        elif isinstance(s, Resigned):
            deadlines.append(s.election_deadline)
        elif isinstance(s, Candidate):
            deadlines.append(s.backoff_until if s.backoff_until is not None
                             else s.election_deadline)
        elif isinstance(s, Follower):
            if not self.requests.pending(s.leader_id, FetchRequest, FetchSnapshotRequest):
                return -1  # nothing asked of the leader (a voter that just restarted): ask now
            deadlines.append(s.fetch_deadline)
        elif isinstance(s, Leader) and len(self.config.voters) > 1:
            deadlines.append(s.progress.check_quorum_deadline)
        return min((d for d in deadlines if d is not None), default=NEVER)

    # ---- events -------------------------------------------------------------------------------
    def tick(self, now: int) -> list[Action]:
        self.requests.expire(now)
        s = self.state
        if isinstance(s, Leader):
            if not s.progress.has_quorum(now):
                self._resign(now, notify=False)
            else:
                self._send_begin_epoch(now)
                self._complete_parked(now, expired_only=True)
        elif isinstance(s, Candidate):
            self._candidate_tick(s, now)
        elif isinstance(s, Follower):
            if now >= s.fetch_deadline:
                self._lost_leader(now)
            else:
                self._fetch_from_leader(now)
        elif self.is_voter and now >= s.election_deadline:
            self._become_candidate(now)
        if isinstance(self.state, Unattached) and not self.is_voter:
            self._discover_leader(now)
        return self._flush_out()

    def receive(self, message: Message, now: int) -> list[Action]:
        if message.is_request:
            self._handle_request(message, now)
        elif self.requests.complete(message):
            self._handle_response(message, now)
        return self._flush_out()

    def propose(self, records: Iterable[bytes], now: int) -> tuple[int | None, list[Action]]:
        """Append records in one batch if leader; returns the offset of the first (None when
        not leader) and the actions."""
        s = self.state
        records = tuple(records)
        if not isinstance(s, Leader) or not records:
            return None, []
        base = self.log.end_offset
        self._append_as_leader(Batch(base, s.epoch, records), now)
        return base, self._flush_out()

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> list[Action]:
        """The application's state after applying everything below `snapshot_id.offset`
        (committed, a batch boundary): keep it and drop the log before it."""
        if snapshot_id.offset > self.high_watermark or snapshot_id.offset <= self.log.start_offset:
            raise ValueError(f"cannot snapshot at {snapshot_id}: high watermark "
                             f"{self.high_watermark}, log start {self.log.start_offset}")
        self.log.delete_before_snapshot(snapshot_id)
        self.snapshot_data = data
        self._out.append(SaveSnapshot(snapshot_id, data))
        return self._flush_out()

    def resign(self, now: int) -> list[Action]:
        """Graceful shutdown of a leader: tell the voters (EndQuorumEpoch) so one of them is
        elected at once instead of after a fetch timeout."""
        if isinstance(self.state, Leader):
            self._resign(now, notify=True)
        return self._flush_out()

    def committed(self, from_offset: int) -> tuple[Batch, ...]:
        """Committed batches from `from_offset` (a batch boundary) to the high watermark."""
        batches = self.log.read(from_offset, 1 << 62)
        return tuple(b for b in batches if b.next_offset <= self.high_watermark)

    # ---- transitions --------------------------------------------------------------------------
    def _transition(self, state: EpochState, voted_id: int = NO_LEADER) -> None:
        """Enter `state`, persisting what it implies before anything else goes out."""
        old_epoch, old_leader = self.state.epoch, self.state.leader_id
        self._parked.clear()
        self.requests.clear()
        self.state = state
        self._out.append(PersistElection(ElectionState(state.epoch, state.leader_id, voted_id)))
        if (state.epoch, state.leader_id) != (old_epoch, old_leader):
            self._out.append(LeaderChange(state.epoch, state.leader_id))

    def _voted_id(self) -> int:
        s = self.state
        if isinstance(s, (Unattached, Follower)):
            return s.voted_id
        return self.node_id if isinstance(s, (Candidate, Leader, Resigned)) else NO_LEADER

    def _learn(self, epoch: int, leader_id: int, now: int) -> None:
        """What a message says of the epoch and its leader: follow it if newer (or if this
        epoch's leader was not known yet)."""
        s = self.state
        if epoch > s.epoch:
            if leader_id == NO_LEADER:
                self._transition(Unattached(epoch, self._kept_deadline(now)))
            else:
                self._become_follower(epoch, leader_id, now, NO_LEADER)
        elif epoch == s.epoch and leader_id != NO_LEADER:
            if isinstance(s, (Unattached, Candidate)):
                self._become_follower(epoch, leader_id, now, self._voted_id())
            elif s.leader_id != leader_id:
                raise QuorumSafetyError(f"replica {self.node_id}: epoch {epoch} has leaders "
                                        f"{s.leader_id} and {leader_id}")

    def _become_follower(self, epoch: int, leader_id: int, now: int, voted_id: int) -> None:
        if leader_id == self.node_id:
            raise QuorumSafetyError(f"replica {self.node_id} told to follow itself in {epoch}")
        # No fetch here: the message that named the leader may carry records not appended yet
        # (a fetch answer), and a fetch sent now would ask from a stale end. With nothing
        # asked of the leader, `next_deadline` is at once, so the next tick fetches.
        self._transition(Follower(epoch, leader_id, now + self.config.fetch_timeout_ms,
                                  voted_id), voted_id)

    def _become_candidate(self, now: int) -> None:
        epoch = self.state.epoch + 1
        candidate = Candidate(epoch, self._election_deadline(now), granted={self.node_id})
        self._transition(candidate, self.node_id)
        if len(candidate.granted) >= self.config.majority:
            self._become_leader(now)
            return
        last = self.log.end()
        for voter in sorted(self.config.voters - {self.node_id}):
            self._send_request(voter, VoteRequest(epoch, self.node_id, last.epoch, last.offset),
                               now)

    def _candidate_tick(self, s: Candidate, now: int) -> None:
        if s.backoff_until is not None:
            if now >= s.backoff_until:
                self._become_candidate(now)
        elif now >= s.election_deadline:
            s.backoff_until = now + self.rng.randrange(self.config.election_backoff_max_ms + 1)
        else:
            last = self.log.end()
            for voter in sorted(self.config.voters - {self.node_id} - s.granted - s.rejected):
                if not self.requests.pending(voter, VoteRequest):
                    self._send_request(voter, VoteRequest(s.epoch, self.node_id, last.epoch,
                                                          last.offset), now)

    def _become_leader(self, now: int) -> None:
        epoch = self.state.epoch
        progress = LeaderState(self.node_id, self.log.end_offset, self.config.voters,
                               now + self.config.check_quorum_timeout_ms,
                               high_watermark=-1)
        self._transition(Leader(epoch, progress), self.node_id)
        self._append_as_leader(Batch(self.log.end_offset, epoch, (LEADER_CHANGE_RECORD,),
                                     control=True), now)
        self._send_begin_epoch(now)

    def _lost_leader(self, now: int) -> None:
        if self.is_voter:
            self._become_candidate(now)
        else:
            self._transition(Unattached(self.state.epoch, self._election_deadline(now)))
            self._discover_leader(now)

    def _resign(self, now: int, notify: bool) -> None:
        s = self.state
        assert isinstance(s, Leader)
        successors = tuple(s.progress.voters_by_end_offset())
        self._transition(Resigned(s.epoch, self.node_id, self._election_deadline(now)),
                         self.node_id)
        if notify:
            for voter in successors:
                self._send_request(voter, EndQuorumEpochRequest(s.epoch, self.node_id,
                                                                successors), now)

    # ---- leading ------------------------------------------------------------------------------
    def _append_as_leader(self, batch: Batch, now: int) -> None:
        s = self.state
        assert isinstance(s, Leader)
        self.log.append(batch)
        self._out += [AppendBatches((batch,)), FlushLog()]
        if s.progress.update_local(self.log.end_offset):
            self._commit(s.progress.high_watermark)
        self._complete_parked(now, expired_only=False)

    def _send_begin_epoch(self, now: int) -> None:
        s = self.state
        assert isinstance(s, Leader)
        for voter in sorted(self.config.voters - {self.node_id} - s.progress.begin_acked):
            if not self.requests.pending(voter, BeginQuorumEpochRequest):
                self._send_request(voter, BeginQuorumEpochRequest(s.epoch, self.node_id), now)

    def _commit(self, high_watermark: int) -> None:
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            self._out.append(Commit(high_watermark))

    # ---- following ----------------------------------------------------------------------------
    def _fetch_from_leader(self, now: int) -> None:
        s = self.state
        assert isinstance(s, Follower)
        if self.requests.pending(s.leader_id, FetchRequest, FetchSnapshotRequest):
            return
        if s.snapshot is not None:
            request: Request = FetchSnapshotRequest(self.node_id, s.epoch, s.snapshot.snapshot_id,
                                                    len(s.snapshot.data),
                                                    self.config.snapshot_chunk_bytes)
        else:
            end = self.log.end()
            request = FetchRequest(self.node_id, s.epoch, end.offset, end.epoch,
                                   self.config.fetch_max_wait_ms)
        self._send_request(s.leader_id, request, now, extra_ms=self.config.fetch_max_wait_ms)

    def _discover_leader(self, now: int) -> None:
        """An observer without a leader asks a voter (whose answer names the leader)."""
        if self.requests.pending_any(FetchRequest):
            return
        voters = sorted(self.config.voters)
        end = self.log.end()
        self._send_request(voters[self.rng.randrange(len(voters))],
                           FetchRequest(self.node_id, self.state.epoch, end.offset, end.epoch, 0),
                           now)

    # ---- plumbing -----------------------------------------------------------------------------
    def _send_request(self, destination: int, body: Request, now: int, extra_ms: int = 0) -> None:
        correlation = self.requests.sent(destination, body, now, extra_ms)
        self._out.append(Send(Message(self.node_id, destination, correlation, body)))

    def _respond(self, request: Message, body: Response) -> None:
        self._out.append(Send(Message(self.node_id, request.source, request.correlation_id,
                                      body)))

    def _kept_deadline(self, now: int) -> int:
        """The election deadline for entering a newer epoch whose leader is unknown: the one
        this replica was already waiting for. As in the Raft paper, only hearing from a leader
        or granting a vote restarts the election timer; restarting it on every newer epoch
        would let a candidate whose log is too short to win — which no one votes for — keep
        pushing back the elections of the replicas that could win, round after round."""
        s = self.state
        if isinstance(s, Unattached | Resigned):
            return s.election_deadline
        if isinstance(s, Follower):
            return s.fetch_deadline
        if isinstance(s, Candidate):
            return s.backoff_until if s.backoff_until is not None else s.election_deadline
        return self._election_deadline(now)  # a leader stepping down waits a whole timeout

    def _election_deadline(self, now: int) -> int:
        timeout = self.config.election_timeout_ms
        return now + timeout + self.rng.randrange(timeout + 1)

    def _flush_out(self) -> list[Action]:
        out, self._out = self._out, []
        return out
