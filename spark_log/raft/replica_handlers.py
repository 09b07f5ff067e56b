"""How a `RaftReplica` answers each request and takes each response (a mixin of the replica,
apart for size; every name here is the replica's).

Requests are answered whatever the state: a replica that is not the leader tells the fetcher
the epoch and leader it knows. Every response says the responder's epoch and leader, which the
requester learns from before anything else.
"""

from __future__ import annotations

from typing import Any

from .actions import AppendBatches, FlushLog, InstallSnapshot, TruncateLog
from .leader_state import ParkedFetch
from .messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Error,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from .quorum_state import (
    Candidate,
    Follower,
    Leader,
    QuorumSafetyError,
    SnapshotFetch,
    Unattached,
)
from .replicated_log import Validity

_LEARN_FROM = (Error.NONE, Error.FENCED_LEADER_EPOCH, Error.NOT_LEADER_OR_FOLLOWER,
               Error.UNKNOWN_LEADER_EPOCH)


class ReplicaHandlers:
    """The message handlers of RaftReplica. Stateless itself: it works on the replica's state."""

    self: Any  # the attributes used below are RaftReplica's

    # ---- requests -------------------------------------------------------------------------
    def _handle_request(self, m: Message, now: int) -> None:
        body = m.body
        if isinstance(body, VoteRequest):
            self._on_vote_request(m, body, now)
        elif isinstance(body, BeginQuorumEpochRequest):
            self._on_begin_epoch(m, body, now)
        elif isinstance(body, EndQuorumEpochRequest):
            self._on_end_epoch(m, body, now)
        elif isinstance(body, FetchRequest):
            self._on_fetch(m, body, now)
        elif isinstance(body, FetchSnapshotRequest):
            self._on_fetch_snapshot(m, body)

    def _on_vote_request(self, m: Message, req: VoteRequest, now: int) -> None:
        def answer(error: Error, granted: bool = False) -> None:
            self._respond(m, VoteResponse(error, self.epoch, self.leader_id, granted))

        if not self.is_voter or req.candidate_id not in self.config.voters:
            return answer(Error.INCONSISTENT_VOTER_SET)
        if req.last_offset < 0 or req.last_epoch < 0 or req.last_epoch >= req.candidate_epoch:
            return answer(Error.INVALID_REQUEST)
        if req.candidate_epoch < self.epoch:
            return answer(Error.FENCED_LEADER_EPOCH)
        if req.candidate_epoch > self.epoch:  # a leader steps down here too
            self._transition(Unattached(req.candidate_epoch, self._kept_deadline(now)))
        s = self.state
        up_to_date = (req.last_epoch, req.last_offset) >= (self.log.last_epoch,
                                                            self.log.end_offset)
        granted = up_to_date and isinstance(s, Unattached) and \
            s.voted_id in (-1, req.candidate_id)
        if granted and s.voted_id != req.candidate_id:
            self._transition(Unattached(s.epoch, self._election_deadline(now),
                                        req.candidate_id), req.candidate_id)
        return answer(Error.NONE, granted)

    def _on_begin_epoch(self, m: Message, req: BeginQuorumEpochRequest, now: int) -> None:
        if req.leader_epoch < self.epoch:
            error = Error.FENCED_LEADER_EPOCH
        else:
            self._learn(req.leader_epoch, req.leader_id, now)
            error = Error.NONE
        self._respond(m, BeginQuorumEpochResponse(error, self.epoch, self.leader_id))

    def _on_end_epoch(self, m: Message, req: EndQuorumEpochRequest, now: int) -> None:
        if req.leader_epoch < self.epoch:
            self._respond(m, EndQuorumEpochResponse(Error.FENCED_LEADER_EPOCH, self.epoch,
                                                    self.leader_id))
            return
        self._learn(req.leader_epoch, req.leader_id, now)
        s = self.state
        if isinstance(s, Follower) and (s.epoch, s.leader_id) == (req.leader_epoch,
                                                                  req.leader_id):
            # The leader is going: the most up-to-date successor stands first, the rest after.
            rank = req.preferred_successors.index(self.node_id) \
                if self.node_id in req.preferred_successors else len(req.preferred_successors)
            deadline = now + rank * self.config.election_backoff_max_ms // 2
            self._transition(Unattached(s.epoch, deadline, s.voted_id), s.voted_id)
        self._respond(m, EndQuorumEpochResponse(Error.NONE, self.epoch, self.leader_id))

    def _leader_only_error(self, current_epoch: int) -> Error | None:
        if current_epoch < self.epoch:
            return Error.FENCED_LEADER_EPOCH
        if current_epoch > self.epoch:
            return Error.UNKNOWN_LEADER_EPOCH
        return None if isinstance(self.state, Leader) else Error.NOT_LEADER_OR_FOLLOWER

    def _on_fetch(self, m: Message, req: FetchRequest, now: int) -> None:
        error = self._leader_only_error(req.current_leader_epoch)
        if error is not None:
            self._respond(m, FetchResponse(error, self.epoch, self.leader_id))
            return
        self._answer_fetch(m, now, may_park=True)

    def _answer_fetch(self, m: Message, now: int, may_park: bool) -> None:
        s, req = self.state, m.body
        validity, found = self.log.validate(req.fetch_offset, req.last_fetched_epoch)
        respond = lambda **kw: self._respond(  # noqa: E731
            m, FetchResponse(Error.NONE, s.epoch, self.node_id, self.high_watermark,
                             self.log.start_offset, **kw))
        if validity is Validity.DIVERGING:
            return respond(diverging=found)
        if validity is Validity.SNAPSHOT:
            return respond(snapshot_id=found)
        if s.progress.update_replica(req.replica_id, req.fetch_offset, now,
                                     self.config.check_quorum_timeout_ms):
            self._commit(s.progress.high_watermark)
            self._complete_parked(now, expired_only=False)
        batches = self.log.read(req.fetch_offset, self.config.fetch_max_bytes)
        progress = s.progress.replica(req.replica_id)
        if not batches and may_park and req.max_wait_ms > 0 and \
                progress.high_watermark_sent == self.high_watermark:
            self._parked[req.replica_id] = ParkedFetch(m, now + req.max_wait_ms)
            return None
        progress.high_watermark_sent = self.high_watermark
        return respond(batches=batches)

    def _complete_parked(self, now: int, expired_only: bool) -> None:
        """Answer held fetches: those past their wait, or all (new records, a new HW)."""
        if not isinstance(self.state, Leader):
            return
        for replica_id, parked in list(self._parked.items()):
            if (not expired_only or now >= parked.deadline) and \
                    self._parked.pop(replica_id, None) is parked:  # not answered meanwhile
                self._answer_fetch(parked.message, now, may_park=False)

    def _on_fetch_snapshot(self, m: Message, req: FetchSnapshotRequest) -> None:
        def answer(error: Error, **kw: Any) -> None:
            self._respond(m, FetchSnapshotResponse(error, self.epoch, self.leader_id, **kw))

        error = self._leader_only_error(req.current_leader_epoch)
        if error is not None:
            return answer(error)
        data = self.snapshot_data
        if data is None or req.snapshot_id != self.log.snapshot_id:
            return answer(Error.SNAPSHOT_NOT_FOUND)
        if not 0 <= req.position <= len(data):
            return answer(Error.POSITION_OUT_OF_RANGE)
        self.state.progress.replica(req.replica_id)  # a follower catching up, not a new voice
        return answer(Error.NONE, snapshot_id=req.snapshot_id, size=len(data),
                      position=req.position,
                      data=data[req.position: req.position + req.max_bytes])

    # ---- responses ------------------------------------------------------------------------
    def _handle_response(self, m: Message, now: int) -> None:
        body = m.body
        if body.error in _LEARN_FROM:
            self._learn(body.leader_epoch, body.leader_id, now)
        if isinstance(body, VoteResponse):
            self._on_vote_response(m, body, now)
        elif isinstance(body, BeginQuorumEpochResponse):
            s = self.state
            if body.error == Error.NONE and isinstance(s, Leader) and body.leader_epoch == s.epoch:
                s.progress.begin_acked.add(m.source)
        elif isinstance(body, (FetchResponse, FetchSnapshotResponse)):
            self._on_fetched(m, body, now)

    def _on_vote_response(self, m: Message, body: VoteResponse, now: int) -> None:
        s = self.state
        if not isinstance(s, Candidate) or body.error != Error.NONE or \
                body.leader_epoch != s.epoch:
            return
        (s.granted if body.vote_granted else s.rejected).add(m.source)
        if len(s.granted) >= self.config.majority:
            self._become_leader(now)

    def _on_fetched(self, m: Message, body: FetchResponse | FetchSnapshotResponse,
                    now: int) -> None:
        s = self.state
        if not isinstance(s, Follower) or s.leader_id != m.source or body.leader_epoch != s.epoch:
            return  # from a replica that is not (or no longer) this one's leader
        if body.error in (Error.SNAPSHOT_NOT_FOUND, Error.POSITION_OUT_OF_RANGE):
            # The leader answered, but replaced the snapshot being fetched (as Kafka's does):
            # it is alive, so its fetch timer restarts, and a fetch names the new one at once.
            s.snapshot = None
            s.fetch_deadline = now + self.config.fetch_timeout_ms
            self._fetch_from_leader(now)
            return
        if body.error != Error.NONE:
            self.requests.backoff(s.leader_id, _request_kind(body),
                                  now + self.config.retry_backoff_ms)
            return
        s.fetch_deadline = now + self.config.fetch_timeout_ms
        if isinstance(body, FetchSnapshotResponse):
            self._take_snapshot_chunk(s, body)
        elif body.diverging is not None:
            self._truncate_to_divergence(body.diverging.offset, body.diverging.epoch)
        elif body.snapshot_id is not None:
            if body.snapshot_id.offset > self.high_watermark:
                s.snapshot = SnapshotFetch(body.snapshot_id)
            # Else it answers a stale fetch, sent before this replica committed past that
            # snapshot (as Kafka, a snapshot at or below what is committed never truncates):
            # the next fetch, from the log's end, is served from the leader's log.
        else:
            self._append_fetched(body)
        self._fetch_from_leader(now)

    def _truncate_to_divergence(self, offset: int, epoch: int) -> None:
        local = self.log.end_offset_for_epoch(epoch)
        target = min(local.offset, offset)
        if target < self.high_watermark:
            raise QuorumSafetyError(f"replica {self.node_id}: the leader wants it truncated to "
                               f"{target}, below its high watermark {self.high_watermark}")
        end = self.log.truncate_to(target)
        self._out.append(TruncateLog(end))

    def _append_fetched(self, body: FetchResponse) -> None:
        batches = body.batches
        if batches and batches[0].base_offset == self.log.end_offset:
            for batch in batches:
                if batch.epoch > self.epoch:
                    raise QuorumSafetyError(f"replica {self.node_id}: batch of epoch {batch.epoch} "
                                       f"from the leader of {self.epoch}")
                self.log.append(batch)
            self._out.append(AppendBatches(batches))
            if self.is_voter:  # the next fetch offset says these are durable
                self._out.append(FlushLog())
        self._commit(min(body.high_watermark, self.log.end_offset))

    def _take_snapshot_chunk(self, s: Follower, body: FetchSnapshotResponse) -> None:
        fetch = s.snapshot
        if fetch is None or body.snapshot_id != fetch.snapshot_id or \
                body.position != len(fetch.data):
            return
        fetch.data += body.data
        fetch.size = body.size
        if len(fetch.data) < fetch.size:
            return
        snapshot_id, data = fetch.snapshot_id, bytes(fetch.data)
        if snapshot_id.offset < self.high_watermark:
            raise QuorumSafetyError(f"replica {self.node_id}: snapshot {snapshot_id} is behind its "
                               f"high watermark {self.high_watermark}")
        s.snapshot = None
        self.log.reset_to_snapshot(snapshot_id)
        self.snapshot_data = data
        self._out.append(InstallSnapshot(snapshot_id, data))
        self._commit(snapshot_id.offset)


def _request_kind(body: FetchResponse | FetchSnapshotResponse) -> type:
    return FetchSnapshotRequest if isinstance(body, FetchSnapshotResponse) else FetchRequest
