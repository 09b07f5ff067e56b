"""The replica's log: appends, truncation at batch boundaries, epochs, where two logs diverge,
and snapshots."""

from __future__ import annotations

import pytest

from spark_log.raft.election_state import ElectionState, ElectionStateError
from spark_log.raft.leader_state import LeaderState
from spark_log.raft.messages import Batch, OffsetAndEpoch
from spark_log.raft.replicated_log import ReplicatedLog, Validity


def batch(base: int, epoch: int, n: int = 2) -> Batch:
    return Batch(base, epoch, tuple(b"r%d" % (base + i) for i in range(n)))


def log_of(*epochs: int) -> ReplicatedLog:
    """Batches of two records, one per epoch given."""
    log = ReplicatedLog()
    for epoch in epochs:
        log.append(batch(log.end_offset, epoch))
    return log


def test_appends_must_follow_the_end_and_never_lower_the_epoch() -> None:
    log = log_of(1, 1, 3)
    assert log.end() == OffsetAndEpoch(6, 3)
    with pytest.raises(ValueError):
        log.append(batch(7, 3))
    with pytest.raises(ValueError):
        log.append(batch(6, 2))


def test_epoch_history() -> None:
    log = log_of(1, 1, 3, 3, 4)
    assert [log.epoch_at(o) for o in (0, 1, 4, 5, 8, 10)] == [0, 1, 1, 3, 3, 4]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 1)  # the largest epoch <= 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(8, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(10, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)


def test_truncation_removes_whole_batches() -> None:
    log = log_of(1, 1, 3, 3)
    assert log.truncate_to(5) == 4  # offset 5 is inside the batch at 4: it goes
    assert log.end() == OffsetAndEpoch(4, 1) and log.end_offset_for_epoch(3).epoch == 1
    assert log.truncate_to(100) == 4 and log.truncate_to(0) == 0


def test_validation_says_where_a_fetcher_diverges() -> None:
    leader = log_of(1, 1, 3, 5)
    assert leader.validate(0, 0) == (Validity.VALID, OffsetAndEpoch(0, 0))
    assert leader.validate(6, 3) == (Validity.VALID, OffsetAndEpoch(6, 3))
    assert leader.validate(8, 5) == (Validity.VALID, OffsetAndEpoch(8, 5))
    # a follower with more of epoch 3 than the leader kept: truncate to where 3 ended
    assert leader.validate(8, 3) == (Validity.DIVERGING, OffsetAndEpoch(6, 3))
    # an epoch the leader never had: back to the end of the epoch before it
    assert leader.validate(7, 2) == (Validity.DIVERGING, OffsetAndEpoch(4, 1))


def test_snapshots_cut_the_log_and_send_fetchers_behind_them_to_the_snapshot() -> None:
    log = log_of(1, 1, 3, 3, 4)
    with pytest.raises(ValueError):
        log.delete_before_snapshot(OffsetAndEpoch(5, 3))  # not a batch boundary
    log.delete_before_snapshot(OffsetAndEpoch(6, 3))
    assert (log.start_offset, log.end_offset, log.batches[0].base_offset) == (6, 10, 6)
    assert log.validate(2, 1) == (Validity.SNAPSHOT, OffsetAndEpoch(6, 3))
    assert log.validate(6, 1) == (Validity.SNAPSHOT, OffsetAndEpoch(6, 3))
    assert log.validate(6, 3) == (Validity.VALID, OffsetAndEpoch(6, 3))
    assert log.validate(10, 4) == (Validity.VALID, OffsetAndEpoch(10, 4))
    assert log.epoch_at(6) == 3 and log.read(6, 1)[0].base_offset == 6
    log.reset_to_snapshot(OffsetAndEpoch(20, 7))
    assert log.end() == OffsetAndEpoch(20, 7) and not log.batches


def test_election_state_round_trips_kafkas_quorum_state_document() -> None:
    state = ElectionState(7, leader_id=2, voted_id=3)
    assert ElectionState.decode(state.encode(frozenset({1, 2, 3}))) == state
    for bad in (b"", b"{}", b'{"leaderEpoch": -1, "leaderId": 1, "votedId": 1}', b"\xff"):
        with pytest.raises(ElectionStateError):
            ElectionState.decode(bad)


def test_a_leader_commits_earlier_epochs_only_with_a_record_of_its_own() -> None:
    """Raft's commitment rule: a majority holding old records is not enough; one record of the
    leader's epoch must be durable on a majority first."""
    progress = LeaderState(1, epoch_start_offset=10, voters=frozenset({1, 2, 3}),
                           check_quorum_deadline=1000)
    assert not progress.update_replica(2, 10, now_ms=0, check_quorum_ms=3000)
    assert not progress.update_local(11) and progress.high_watermark == -1
    assert progress.update_replica(2, 11, now_ms=1, check_quorum_ms=3000)
    assert progress.high_watermark == 11
    assert not progress.update_replica(3, 5, now_ms=2, check_quorum_ms=3000)  # never back
    assert progress.high_watermark == 11


def test_a_leader_keeps_its_quorum_only_while_a_majority_fetches() -> None:
    progress = LeaderState(1, 0, frozenset({1, 2, 3}), check_quorum_deadline=3000)
    assert progress.has_quorum(2999) and not progress.has_quorum(3000)
    progress.update_replica(3, 0, now_ms=2500, check_quorum_ms=3000)  # 1 + 3 is a majority
    assert progress.has_quorum(5499) and not progress.has_quorum(5500)
    assert progress.voters_by_end_offset() == [3, 2]
