"""The leader's replication state machine, driven by hand and by random histories: the high
watermark (smallest log end of the maximal ISR, never back, held by a follower not heard from),
Kafka's caught-up rule, ISR shrink after `replica.lag.time.max.ms`, expansion once a follower
reaches the high watermark and the leader's epoch start, one proposal at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.replication.leader_partition import UNKNOWN, IsrChange, LeaderPartition

LAG_MS = 30_000


def leader(isr: tuple[int, ...] = (1, 2, 3), end: int = 10, hw: int = 10,
           epoch_start: int = 10, now: int = 0) -> LeaderPartition:
    return LeaderPartition(node_id=1, leader_epoch=5, partition_epoch=7, replicas=(1, 2, 3),
                           isr=isr, log_end_offset=end, high_watermark=hw,
                           epoch_start_offset=epoch_start, started_ms=now)


def test_the_high_watermark_waits_for_every_isr_member() -> None:
    p = leader()
    assert not p.appended(15)  # followers not heard from in this epoch: held
    assert not p.follower_fetched(2, 15, 1)
    assert p.follower_fetched(3, 12, 2) and p.high_watermark == 12
    assert p.follower_fetched(3, 15, 3) and p.high_watermark == 15
    assert not p.follower_fetched(3, 13, 4)  # a follower that truncated: never back
    assert p.high_watermark == 15


def test_a_lone_leader_commits_what_it_appends() -> None:
    p = leader(isr=(1,))
    assert p.appended(11) and p.high_watermark == 11


def test_caught_up_now_or_as_of_the_previous_fetch() -> None:
    p = leader()
    p.appended(20)
    p.follower_fetched(2, 20, 100)  # at the leader's end: caught up now
    assert p.followers[2].last_caught_up_ms == 100
    p.appended(30)
    p.follower_fetched(2, 25, 200)  # short of 30, but past 20 (the end at its last fetch)
    assert p.followers[2].last_caught_up_ms == 100
    p.follower_fetched(2, 30, 300)  # reached 30, the end at its previous fetch (200)
    assert p.followers[2].last_caught_up_ms == 300
    p.appended(40)
    p.follower_fetched(2, 35, 400)  # 35 >= 30 (end at the 300 fetch): caught up as of 300
    assert p.followers[2].last_caught_up_ms == 300


def test_a_follower_not_caught_up_for_the_lag_time_leaves_the_isr() -> None:
    p = leader(now=0)
    p.appended(20)
    p.follower_fetched(2, 20, 1_000)
    assert p.shrink(LAG_MS, LAG_MS) is None  # 3 counts as caught up when the epoch began
    change = p.shrink(LAG_MS + 1, LAG_MS)
    assert change == IsrChange((1, 2), leader_epoch=5, partition_epoch=7)
    assert p.shrink(LAG_MS + 2, LAG_MS) is None and p.expansion() is None  # one at a time
    assert not p.follower_fetched(2, 20, LAG_MS + 3)  # 3 still counts until committed
    assert p.isr_committed((1, 2), partition_epoch=8)
    assert p.isr == (1, 2) and p.high_watermark == 20 and p.pending is None


def test_a_refused_change_can_be_proposed_again() -> None:
    p = leader(now=0)
    assert p.shrink(LAG_MS + 1, LAG_MS) is not None
    p.isr_change_failed()
    assert p.shrink(LAG_MS + 2, LAG_MS) == IsrChange((1,), 5, 7)


def test_a_follower_joins_once_it_reaches_the_high_watermark_and_the_epoch_start() -> None:
    p = leader(isr=(1, 2), end=30, hw=20, epoch_start=25)
    p.follower_fetched(2, 30, 1)
    assert p.high_watermark == 30
    p.follower_fetched(3, 24, 2)
    assert p.expansion() is None  # below the high watermark
    p.follower_fetched(3, 30, 3)
    change = p.expansion()
    assert change == IsrChange((1, 2, 3), 5, 7)
    assert p.maximal_isr == {1, 2, 3}  # counts for the high watermark while pending
    p.appended(40)
    p.follower_fetched(2, 40, 4)
    assert p.high_watermark == 30  # 3 is not at 40 yet
    assert p.isr_committed((1, 2, 3), 8) is False and p.isr == (1, 2, 3)
    p.follower_fetched(3, 40, 5)
    assert p.high_watermark == 40


def test_stale_and_impossible_inputs() -> None:
    p = leader()
    assert not p.isr_committed((1,), partition_epoch=6) and p.isr == (1, 2, 3)
    with pytest.raises(ValueError, match="leaves out its leader"):
        p.isr_committed((2, 3), partition_epoch=9)
    with pytest.raises(ValueError, match="not a follower"):
        p.follower_fetched(9, 0, 1)
    with pytest.raises(ValueError, match="past the leader's log end"):
        p.follower_fetched(2, 11, 1)
    with pytest.raises(ValueError, match="went back"):
        p.appended(9)
    with pytest.raises(ValueError, match="not in its ISR"):
        leader(isr=(2, 3))
    assert p.under_min_isr(4) and not p.under_min_isr(3)


events = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.integers(0, 60)),
    st.tuples(st.just("tick"), st.integers(0, 20_000)),
    st.tuples(st.just("commit"), st.booleans()),
), max_size=80)


@settings(max_examples=300, deadline=None)
@given(events)
def test_random_histories_keep_the_invariants(history: list[tuple]) -> None:  # type: ignore[type-arg]
    p = leader(now=0)
    now, epoch = 0, 7
    for event in history:
        before = p.high_watermark
        if event[0] == "append":
            p.appended(p.log_end_offset + event[1])
        elif event[0] == "fetch":
            _, replica, offset = event
            p.follower_fetched(replica, min(offset, p.log_end_offset), now)
        elif event[0] == "tick":
            now += event[1]
            p.shrink(now, LAG_MS) or p.expansion()
        elif p.pending is not None:
            if event[1]:
                epoch += 1
                p.isr_committed(p.pending.isr, epoch)
            else:
                p.isr_change_failed()
        assert p.high_watermark >= before
        assert 1 in p.isr
        if p.high_watermark > before:  # it moved: every member of the maximal ISR has it
            ends = [p.followers[r].log_end_offset for r in p.maximal_isr if r != 1]
            assert UNKNOWN not in ends
            assert p.high_watermark == min([p.log_end_offset, *ends])


def test_acks_all_waits_for_the_high_watermark_and_needs_min_isr_when_it_gets_there() -> None:
    p = leader(now=0)
    p.appended(12)
    assert p.acks_all_done(12, 2) is None  # followers do not have it yet
    p.follower_fetched(2, 12, 1)
    p.follower_fetched(3, 12, 2)
    assert p.acks_all_done(12, 2) is True
    p.appended(14)
    p.follower_fetched(2, 14, LAG_MS + 5)  # caught up; 3 last was at 2
    change = p.shrink(LAG_MS + 10, LAG_MS)
    assert change == IsrChange((1, 2), 5, 7)
    p.isr_committed((1, 2), 8)
    assert p.high_watermark == 14 and p.acks_all_done(14, 2) is True
    assert p.shrink(2 * LAG_MS + 10, LAG_MS) == IsrChange((1,), 5, 8)  # now 2 lags too
    p.isr_committed((1,), 9)
    p.appended(15)
    assert p.acks_all_done(15, 2) is False  # only the leader has it: NOT_ENOUGH_..._AFTER_APPEND


def test_an_unanswered_expansion_still_counts_for_the_high_watermark() -> None:
    """The proposal may have been committed: until an answer or the metadata settles it, the
    joining replica holds the high watermark back."""
    p = leader(isr=(1, 2), end=30, hw=30, epoch_start=25)
    p.follower_fetched(2, 30, 1)
    p.follower_fetched(3, 30, 2)
    assert p.expansion() is not None
    p.appended(40)
    p.follower_fetched(2, 40, 3)
    assert p.high_watermark == 30 and p.pending is not None  # 3 is counted, though not in isr
