"""Where a follower truncates on a diverging epoch: the two KIP-101 scenarios, a follower that
does not know the leader's epoch (asks again), and Kafka's edge cases, checked against logs
built and compared record by record."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spark_log.replication.truncation import (
    UNDEFINED,
    EpochStart,
    Truncation,
    end_offset_for,
    truncation,
)


def entries(*pairs: tuple[int, int]) -> list[EpochStart]:
    return [EpochStart(e, s) for e, s in pairs]


def test_end_offset_for_as_kafka_answers() -> None:
    log = entries((1, 0), (3, 10), (5, 20))
    assert end_offset_for(log, 5, 25) == (5, 25)
    assert end_offset_for(log, 4, 25) == (3, 20)
    assert end_offset_for(log, 1, 25) == (1, 10)
    assert end_offset_for(log, 0, 25) == (0, 0)  # below every entry: the first start
    assert end_offset_for(log, 6, 25) == (UNDEFINED, UNDEFINED)  # above every entry
    assert end_offset_for([], 1, 25) == (UNDEFINED, UNDEFINED)


def test_kip101_a_follower_keeps_what_the_new_leader_has() -> None:
    """Scenario 1: the follower restarts, the high watermark it had is stale; the new leader
    (epoch 2) says epoch 1 ended at 2 on its side — the follower keeps offsets 0 and 1."""
    assert truncation(entries((1, 0)), follower_end=2, follower_high_watermark=1,
                      leader_epoch=1, leader_end=2) == Truncation(2, True)


def test_kip101_diverged_logs_after_both_replicas_crashed() -> None:
    """Scenario 2: both wrote offset 1 in epoch 1; after crashes the other replica led epoch 2
    from offset 1. The follower's epoch-1 offset 1 is not the leader's: it truncates to 1."""
    assert truncation(entries((1, 0)), follower_end=2, follower_high_watermark=1,
                      leader_epoch=1, leader_end=1) == Truncation(1, True)


def test_a_follower_without_the_leaders_epoch_asks_again() -> None:
    follower = entries((1, 0), (2, 5), (4, 9))
    first = truncation(follower, 12, 3, leader_epoch=3, leader_end=11)
    assert first == Truncation(9, False)  # end of epoch 2 here: ask again with epoch 2
    assert truncation(follower[:2], 9, 3, leader_epoch=2, leader_end=7) == Truncation(7, True)


def test_kafkas_edge_cases() -> None:
    follower = entries((1, 0), (2, 5))
    assert truncation(follower, 8, 4, UNDEFINED, UNDEFINED) == Truncation(4, True)
    assert truncation(follower, 8, 4, UNDEFINED, 6) == Truncation(6, True)
    assert truncation([], 8, 4, 2, 6) == Truncation(6, True)
    assert truncation(follower, 8, 4, 2, 30) == Truncation(8, True)  # never past its end


logs = st.lists(st.integers(1, 4), min_size=0, max_size=12)  # epoch of each record


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 4), logs, logs)
def test_after_truncating_the_follower_is_a_prefix_of_the_leader(prefix_epoch: int,
                                                                 mine: list[int],
                                                                 theirs: list[int]) -> None:
    """Two logs with a common prefix, then each its own records (epochs non-decreasing, the
    leader's last epoch the highest): repeating the exchange ends with the follower's log a
    prefix of the leader's — nothing of its own tail kept, nothing common lost."""
    common = [prefix_epoch] * 3
    follower_log = common + sorted(e for e in mine if e >= prefix_epoch)
    leader_log = common + sorted(e for e in theirs if e >= prefix_epoch) + [9]  # its epoch
    # One leader wrote each epoch, in order, after its log matched: the same epoch at the same
    # offset is the same record, with the same log before it (Raft's log matching).
    starts = {e.epoch: e.start_offset for e in epochs_of(leader_log)}
    assume(all(starts.get(e.epoch, e.start_offset) == e.start_offset
               for e in epochs_of(follower_log)))
    assume(all(follower_log[:i] == leader_log[:i]
               for i in range(min(len(follower_log), len(leader_log)))
               if follower_log[i] == leader_log[i]))
    follower = list(follower_log)
    for _ in range(10):
        asked = epochs_of(follower)[-1].epoch if follower else UNDEFINED
        leader_epoch, leader_end = end_offset_for(epochs_of(leader_log), asked, len(leader_log))
        cut = truncation(epochs_of(follower), len(follower), 0, leader_epoch, leader_end)
        follower = follower[:cut.offset]
        if cut.done:
            break
    assert follower == leader_log[:len(follower)]
    assert len(follower) >= len(common) or len(follower_log) < len(common)


def epochs_of(log: list[int]) -> list[EpochStart]:
    found: list[EpochStart] = []
    for offset, epoch in enumerate(log):
        if not found or epoch > found[-1].epoch:
            found.append(EpochStart(epoch, offset))
    return found
