"""One replica driven by hand: what it does at once, and the order of its actions (what the
driver relies on for durability)."""

from __future__ import annotations

import random

from spark_log.raft.actions import (
    AppendBatches,
    Commit,
    FlushLog,
    LeaderChange,
    PersistElection,
    Send,
)
from spark_log.raft.config import QuorumConfig
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import Error, FetchRequest, FetchResponse, Message, VoteRequest
from spark_log.raft.replica import RaftReplica
from spark_log.raft.replicated_log import ReplicatedLog


def replica(node: int, voters: set[int], epoch: int = 0) -> RaftReplica:
    return RaftReplica(node, QuorumConfig(frozenset(voters)), ElectionState(epoch),
                       ReplicatedLog(), None, 0, random.Random(7))


def kinds(actions: list) -> list[str]:  # type: ignore[type-arg]
    return [type(a).__name__ for a in actions]


def test_a_lone_voter_leads_at_once_and_commits_what_it_appends() -> None:
    r = replica(1, {1})
    assert r.next_deadline() == 0
    actions = r.tick(0)
    assert r.is_leader and r.epoch == 1
    assert kinds(actions)[:2] == ["PersistElection", "LeaderChange"]
    offset, actions = r.propose([b"a", b"b"], 5)
    assert offset == 1  # after the epoch-start record
    # appended and flushed before the commit that relies on it
    assert kinds(actions) == ["AppendBatches", "FlushLog", "Commit"]
    assert actions[-1] == Commit(3) and r.high_watermark == 3


def test_a_vote_is_persisted_before_it_is_sent() -> None:
    r = replica(2, {1, 2, 3})
    actions = r.receive(Message(1, 2, 9, VoteRequest(1, 1, 0, 0)), 10)
    send = next(i for i, a in enumerate(actions) if isinstance(a, Send))
    persisted = [a.state for a in actions[:send] if isinstance(a, PersistElection)]
    assert persisted[-1] == ElectionState(1, -1, 1)  # the vote, on disk before the answer
    assert actions[send].message.body.vote_granted
    again = r.receive(Message(3, 2, 10, VoteRequest(1, 3, 0, 0)), 11)  # one vote per epoch
    assert not next(a for a in again if isinstance(a, Send)).message.body.vote_granted


def test_a_follower_flushes_what_it_fetched_before_fetching_again() -> None:
    r = replica(2, {1, 2, 3})
    r.receive(Message(1, 2, 1, VoteRequest(1, 1, 0, 0)), 0)
    from spark_log.raft.messages import Batch, BeginQuorumEpochRequest

    actions = r.receive(Message(1, 2, 2, BeginQuorumEpochRequest(1, 1)), 1)
    assert isinstance(next(a for a in actions if isinstance(a, LeaderChange)), LeaderChange)
    assert not any(isinstance(a, Send) and isinstance(a.message.body, FetchRequest)
                   for a in actions)  # it fetches at its next tick, which is at once
    assert r.next_deadline() == -1
    fetch = next(a.message for a in r.tick(1) if isinstance(a, Send) and
                 isinstance(a.message.body, FetchRequest))
    batch = Batch(0, 1, (b"x",))
    response = FetchResponse(Error.NONE, 1, 1, high_watermark=1, log_start_offset=0,
                             batches=(batch,))
    actions = r.receive(Message(1, 2, fetch.correlation_id, response), 2)
    order = kinds(actions)
    assert order.index("AppendBatches") < order.index("FlushLog") < order.index("Send")
    assert next(a for a in actions if isinstance(a, AppendBatches)).batches == (batch,)
    assert any(isinstance(a, FlushLog) for a in actions)
    next_fetch = next(a.message.body for a in actions if isinstance(a, Send))
    assert next_fetch.fetch_offset == 1 and next_fetch.last_fetched_epoch == 1


def test_only_a_leader_takes_proposals() -> None:
    r = replica(2, {1, 2, 3})
    assert r.propose([b"x"], 0) == (None, [])


def test_a_refused_candidate_does_not_push_back_the_election_of_a_voter_that_can_win() -> None:
    """Only granting a vote or hearing from a leader restarts the election timer (the Raft
    paper's rule): a candidate with a shorter log, refused round after round, must not keep
    moving the deadline of the voter with the longer log, or no election is ever won."""
    from spark_log.raft.messages import Batch

    r = RaftReplica(2, QuorumConfig(frozenset({1, 2, 3})), ElectionState(1),
                    ReplicatedLog(None, [Batch(0, 1, (b"x",))]), None, 0, random.Random(7))
    deadline = r.next_deadline()
    for epoch, now in ((2, 100), (3, 300), (4, 500)):
        actions = r.receive(Message(3, 2, epoch, VoteRequest(epoch, 3, 0, 0)), now)
        answer = next(a.message.body for a in actions if isinstance(a, Send))
        assert not answer.vote_granted and r.epoch == epoch  # its log is behind: refused
        assert r.next_deadline() == deadline
    r.tick(deadline)
    assert r.epoch == 5 and r.state.granted == {2}  # it stands when its own timer runs out
    granted = replica(1, {1, 2, 3})
    granted.receive(Message(3, 1, 1, VoteRequest(1, 3, 0, 0)), 700)  # a vote given restarts it
    assert granted.next_deadline() >= 700 + granted.config.election_timeout_ms


def sent(actions: list, kind: type) -> Message | None:  # type: ignore[type-arg]
    return next((a.message for a in actions if isinstance(a, Send) and
                 isinstance(a.message.body, kind)), None)


def test_a_voter_restarted_as_a_follower_fetches_from_its_leader_at_once() -> None:
    """Its election state names the leader: it asks that leader at once. Waiting for the
    fetch timeout instead, it stands for election then and unseats a healthy leader."""
    r = RaftReplica(2, QuorumConfig(frozenset({1, 2, 3})), ElectionState(4, 1, -1),
                    ReplicatedLog(), None, 1000, random.Random(7))
    assert r.next_deadline() <= 1000
    fetch = sent(r.tick(1000), FetchRequest)
    assert fetch is not None and fetch.destination == 1
    assert fetch.body.current_leader_epoch == 4
    assert r.next_deadline() > 1000  # then it waits for the answer


def test_a_follower_whose_snapshot_the_leader_replaced_keeps_following_it() -> None:
    """A leader that snapshots often replaces the snapshot a follower is fetching, and answers
    SNAPSHOT_NOT_FOUND: an answer from a live leader, so the follower starts over from a fetch
    at once and its fetch timer restarts (Kafka's rule); it never stands for election."""
    from spark_log.raft.messages import FetchSnapshotRequest, FetchSnapshotResponse, OffsetAndEpoch

    r = RaftReplica(2, QuorumConfig(frozenset({1, 2, 3})), ElectionState(1, 1, -1),
                    ReplicatedLog(), None, 0, random.Random(7))
    fetch = sent(r.tick(0), FetchRequest)
    timeout = r.config.fetch_timeout_ms
    for now in range(100, 3 * timeout, 100):  # snapshot n, replaced by n + 1 while fetched
        assert fetch is not None
        answer = FetchResponse(Error.NONE, 1, 1, high_watermark=now, log_start_offset=now,
                               snapshot_id=OffsetAndEpoch(now, 1))
        snapshot_fetch = sent(r.receive(Message(1, 2, fetch.correlation_id, answer), now),
                              FetchSnapshotRequest)
        assert snapshot_fetch is not None and snapshot_fetch.body.snapshot_id.offset == now
        gone = FetchSnapshotResponse(Error.SNAPSHOT_NOT_FOUND, 1, 1)
        actions = r.receive(Message(1, 2, snapshot_fetch.correlation_id, gone), now + 50)
        fetch = sent(actions, FetchRequest)
        assert r.leader_id == 1 and r.epoch == 1 and sent(actions, VoteRequest) is None
        assert r.state.fetch_deadline == now + 50 + timeout
    assert r.leader_id == 1 and r.epoch == 1


def test_a_snapshot_named_in_answer_to_a_stale_fetch_is_not_fetched() -> None:
    """A fetch sent before the replica committed past the leader's snapshot is answered with
    that snapshot: the replica already holds everything below it, so it fetches records from
    its log's end instead (installing it would move its high watermark back)."""
    from spark_log.raft.messages import Batch, FetchSnapshotRequest, OffsetAndEpoch

    r = RaftReplica(2, QuorumConfig(frozenset({1, 2, 3})), ElectionState(1, 1, -1),
                    ReplicatedLog(), None, 0, random.Random(7))
    fetch = sent(r.tick(0), FetchRequest)
    assert fetch is not None
    batches = tuple(Batch(i, 1, (b"x",)) for i in range(4))
    answer = FetchResponse(Error.NONE, 1, 1, high_watermark=4, log_start_offset=0,
                           batches=batches)
    fetch = sent(r.receive(Message(1, 2, fetch.correlation_id, answer), 10), FetchRequest)
    assert fetch is not None and r.high_watermark == 4
    stale = FetchResponse(Error.NONE, 1, 1, high_watermark=6, log_start_offset=3,
                          snapshot_id=OffsetAndEpoch(3, 1))
    actions = r.receive(Message(1, 2, fetch.correlation_id, stale), 20)
    assert sent(actions, FetchSnapshotRequest) is None
    again = sent(actions, FetchRequest)
    assert again is not None and again.body.fetch_offset == 4 and r.high_watermark == 4
