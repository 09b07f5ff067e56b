"""PartitionChangeBuilder's rules as a pure function: leader elections (preferred, online,
unclean), ISR changes, reassignments, brokers leaving and joining, and the NO_LEADER_CHANGE
sentinel: the record names a leader only when the leader epoch must go up."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.broker_registration import BrokerRegistration
from spark_log.metadata.errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError
from spark_log.metadata.partition_change import (
    Election,
    PartitionChangeResult,
    TargetChange,
    build_partition_change,
    change_for_broker_joining,
    change_for_broker_leaving,
    elect_leader,
    is_no_op,
)
from spark_log.metadata.partition_registration import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionRegistration,
)
from spark_log.metadata.reassignment import cancel_reassignment, reassign
from spark_log.metadata.records import ZERO_UUID, PartitionChangeRecord

TOPIC = uuid.UUID(int=77)
RECOVERING = LeaderRecoveryState.RECOVERING

# Kafka's test partitions: "foo" is whole, "bar" is moving from 1 to 4, "baz" is led by a
# replica that is not the preferred one, "offline" has no leader.
FOO = PartitionRegistration(replicas=(2, 1, 3), isr=(2, 1, 3), leader=1, leader_epoch=100,
                            partition_epoch=200)
BAR = PartitionRegistration(replicas=(1, 2, 3, 4), isr=(1, 2, 3), leader=1, leader_epoch=100,
                            partition_epoch=200, removing_replicas=(1,), adding_replicas=(4,))
BAZ = PartitionRegistration(replicas=(2, 1, 3), isr=(1, 3), leader=3, leader_epoch=100,
                            partition_epoch=200)
OFFLINE = PartitionRegistration(replicas=(2, 1, 3), isr=(3,), leader=NO_LEADER,
                                leader_epoch=100, partition_epoch=200)


def not_3(broker: int) -> bool:
    return broker != 3


def everyone(broker: int) -> bool:
    return True


def build(partition, acceptable=not_3, **target):
    return build_partition_change(TOPIC, 0, partition, acceptable, TargetChange(**target))


def record(**fields):
    return PartitionChangeRecord(topic_id=TOPIC, partition_id=0, **fields)


def leader_after(partition, acceptable=not_3, **target):
    result = build(partition, acceptable, **target)
    return (partition.leader, False) if result is None else (
        partition.merge(result.record).leader, result.unclean)


def brokers(active=(), fenced=(), shutting_down=()):
    def registration(broker_id, is_fenced=False, shutdown=False):
        return BrokerRegistration(broker_id, 1, ZERO_UUID, fenced=is_fenced,
                                  in_controlled_shutdown=shutdown)
    found = {n: registration(n) for n in active}
    found.update({n: registration(n, is_fenced=True) for n in fenced})
    found.update({n: registration(n, shutdown=True) for n in shutting_down})
    return found


# ---- elections --------------------------------------------------------------------------------

@pytest.mark.parametrize(("partition", "acceptable", "target", "expected"), [
    (FOO, not_3, {"election": Election.PREFERRED}, (2, False)),
    (FOO, not_3, {}, (1, False)),  # the leader still qualifies: it stays
    (FOO, not_3, {"election": Election.UNCLEAN}, (1, False)),
    (FOO, not_3, {"isr": (1, 3)}, (1, False)),
    (FOO, not_3, {"isr": (3,)}, (NO_LEADER, False)),  # 3 is in the ISR but not acceptable
    (FOO, not_3, {"isr": (3,), "election": Election.UNCLEAN}, (2, True)),
    (FOO, not_3, {"isr": (4,), "replicas": (2, 1, 3, 4), "election": Election.UNCLEAN},
     (4, False)),
    (BAZ, everyone, {"election": Election.PREFERRED}, (3, False)),  # 2 is not in the ISR
    (BAZ, everyone, {}, (3, False)),
    (OFFLINE, lambda b: b == 1, {}, (NO_LEADER, False)),
    (OFFLINE, lambda b: b == 1, {"election": Election.UNCLEAN}, (1, True)),
])
def test_leader_election(partition, acceptable, target, expected):
    assert leader_after(partition, acceptable, **target) == expected


def test_nothing_to_change_gives_none():
    assert build(FOO) is None
    assert build(FOO, election=Election.UNCLEAN) is None
    assert build(BAR) is None
    assert build(BAR, election=Election.UNCLEAN) is None
    assert build(BAZ, everyone, election=Election.PREFERRED) is None


def test_an_isr_change_alone_keeps_the_leader_epoch():
    result = build(FOO, isr=(2, 1))
    assert result == PartitionChangeResult(record(isr=(2, 1)))
    assert result.record.leader == NO_LEADER_CHANGE
    after = FOO.merge(result.record)
    assert (after.leader_epoch, after.partition_epoch) == (100, 201)


def test_an_isr_change_that_drops_the_leader_elects_another():
    assert build(FOO, isr=(2, 3)).record == record(isr=(2, 3), leader=2)


def test_the_last_isr_member_stays_in_the_isr_without_leading():
    registration = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1,
                                         leader_recovery_state=RECOVERING)
    result = build(registration, lambda b: False, isr=())
    assert result.record == record(leader=NO_LEADER)  # no empty ISR, recovery state kept
    offline = registration.merge(result.record)
    assert (offline.leader, offline.isr, offline.leader_recovery_state) == (-1, (1,), RECOVERING)
    back = offline.merge(build(offline, everyone).record)
    assert (back.leader, back.leader_epoch, back.leader_recovery_state) == (1, 2, RECOVERING)


def test_an_unclean_election_resets_the_isr_and_marks_the_leader_recovering():
    result = build(FOO, isr=(3,), election=Election.UNCLEAN)
    assert result == PartitionChangeResult(
        record(isr=(2,), leader=2, leader_recovery_state=1), unclean=True)
    for target in ({}, {"isr": (2,)}):
        result = build(OFFLINE, lambda b: b == 1, election=Election.UNCLEAN, **target)
        assert result.record == record(isr=(1,), leader=1, leader_recovery_state=1)
        assert result.unclean


def test_a_recovered_leader_reports_it():
    recovering = FOO.with_changes(leader_recovery_state=RECOVERING)
    result = build(recovering, leader_recovery_state=LeaderRecoveryState.RECOVERED)
    assert result.record == record(leader_recovery_state=0)


def test_eligible_leader_replicas_are_cleared_as_kafka_does_without_them():
    result = build(FOO.with_changes(elr=(3,)))
    assert result.record == record(eligible_leader_replicas=())


# ---- reassignments ----------------------------------------------------------------------------

CLUSTER = brokers(active=(1, 2, 4), fenced=(3,))


def test_reordering_replicas_completes_at_once():
    assert reassign(TOPIC, 0, FOO, (3, 2, 1), CLUSTER).record == record(replicas=(3, 2, 1))


def test_removing_a_replica_completes_at_once_and_bumps_the_leader_epoch():
    result = reassign(TOPIC, 0, FOO, (1, 2), CLUSTER)
    assert result.record == record(replicas=(1, 2), isr=(2, 1), leader=1)
    after = FOO.merge(result.record)
    assert (after.leader, after.leader_epoch) == (1, 101)  # same leader, new epoch


def test_adding_a_replica_waits_for_it_to_join_the_isr():
    result = reassign(TOPIC, 0, FOO, (1, 2, 3, 4), CLUSTER)
    assert result.record == record(replicas=(1, 2, 3, 4), adding_replicas=(4,))
    moving = FOO.merge(result.record)
    assert moving.is_reassigning and moving.leader_epoch == 100
    done = moving.merge(build(moving, isr=(2, 1, 3, 4)).record)
    assert not done.is_reassigning and done.replicas == (1, 2, 3, 4)


def test_an_isr_that_holds_every_target_completes_the_move():
    assert build(BAR, isr=(1, 2, 3, 4)).record == record(
        replicas=(2, 3, 4), isr=(2, 3, 4), leader=2, removing_replicas=(), adding_replicas=())


def test_a_removed_leader_is_demoted_even_with_no_one_to_replace_it():
    moving = PartitionRegistration(replicas=(2, 3, 0, 1), isr=(0, 1), leader=0,
                                   removing_replicas=(0, 1), adding_replicas=(2, 3))
    result = build(moving, lambda b: False, isr=(0, 1, 2, 3))
    assert result.record == record(replicas=(2, 3), isr=(2, 3), removing_replicas=(),
                                   adding_replicas=(), leader=NO_LEADER)


def test_cancelling_a_move_restores_the_original_replicas():
    assert cancel_reassignment(TOPIC, 0, BAR, CLUSTER).record == record(
        replicas=(1, 2, 3), leader=1, removing_replicas=(), adding_replicas=())


def test_cancelling_needs_unclean_election_when_only_new_replicas_are_in_sync():
    moving = BAR.with_changes(isr=(4,), leader=4)
    with pytest.raises(InvalidReplicaAssignmentError, match="unclean leader election"):
        cancel_reassignment(TOPIC, 0, moving, CLUSTER)
    result = cancel_reassignment(TOPIC, 0, moving, CLUSTER, unclean_leader_election=True)
    assert result.record == record(replicas=(1, 2, 3), isr=(1,), leader=1,
                                   removing_replicas=(), adding_replicas=())
    assert result.unclean  # 1 was not in the ISR: the caller logs possible data loss
    with pytest.raises(NoReassignmentInProgressError):
        cancel_reassignment(TOPIC, 0, FOO, CLUSTER)


def test_reassignment_targets_are_checked():
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 9"):
        reassign(TOPIC, 0, FOO, (1, 9), CLUSTER)
    with pytest.raises(InvalidReplicaAssignmentError, match="more than once"):
        reassign(TOPIC, 0, FOO, (1, 1), CLUSTER)


# ---- brokers leaving and joining, ElectLeaders -------------------------------------------------

def test_a_fenced_leader_hands_over_to_the_next_live_isr_member():
    cluster = brokers(active=(1, 2, 3))
    result = change_for_broker_leaving(TOPIC, 0, FOO, cluster, 1)
    assert result.record == record(isr=(2, 3), leader=2)
    assert change_for_broker_leaving(TOPIC, 0, FOO, cluster, 3).record == record(isr=(2, 1))


def test_a_broker_shutting_down_is_not_elected():
    cluster = brokers(active=(1,), shutting_down=(2,))
    assert change_for_broker_leaving(TOPIC, 0, FOO, cluster, 1).record == record(
        isr=(2, 3), leader=NO_LEADER)


def test_the_last_isr_member_leaving_takes_the_partition_offline_or_unclean():
    alone = PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1)
    cluster = brokers(active=(1, 2))
    assert change_for_broker_leaving(TOPIC, 0, alone, cluster, 1).record == record(
        leader=NO_LEADER)
    result = change_for_broker_leaving(TOPIC, 0, alone, cluster, 1, unclean_leader_election=True)
    assert result == PartitionChangeResult(
        record(leader=2, isr=(2,), leader_recovery_state=1), unclean=True)


def test_an_unfenced_broker_may_lead_a_partition_without_leader():
    offline = PartitionRegistration(replicas=(1, 2), isr=(1,), leader=NO_LEADER)
    cluster = brokers(fenced=(1, 2))
    assert change_for_broker_joining(TOPIC, 0, offline, cluster, 1).record == record(leader=1)
    assert change_for_broker_joining(TOPIC, 0, offline, cluster, 2) is None


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica():
    cluster = brokers(active=(1, 2, 3))
    assert elect_leader(TOPIC, 0, FOO, cluster, Election.PREFERRED).record == record(leader=2)
    assert elect_leader(TOPIC, 0, FOO, cluster, Election.UNCLEAN) is None  # has a leader


def test_no_op_records():
    assert is_no_op(PartitionChangeRecord())
    assert not is_no_op(record(leader=NO_LEADER))
    assert not is_no_op(record(isr=()))
    assert not is_no_op(record(leader_recovery_state=0))
    assert not is_no_op(record(last_known_elr=(6,)))


# ---- properties -------------------------------------------------------------------------------

@st.composite
def situations(draw):
    replicas = tuple(draw(st.permutations(range(6)))[: draw(st.integers(1, 4))])
    isr = tuple(r for r in replicas if draw(st.booleans())) or replicas[:1]
    leader = draw(st.sampled_from([NO_LEADER, *isr]))
    partition = PartitionRegistration(replicas=replicas, isr=isr, leader=leader,
                                      leader_epoch=5, partition_epoch=9)
    live = frozenset(draw(st.sets(st.integers(0, 5))))
    target_isr = draw(st.none() | st.sets(st.sampled_from(replicas)).map(
        lambda chosen: tuple(r for r in replicas if r in chosen)))
    return partition, live, TargetChange(isr=target_isr,
                                         election=draw(st.sampled_from(Election)))


@settings(max_examples=300, deadline=None)
@given(situations())
def test_any_change_keeps_kafkas_invariants(situation):
    partition, live, target = situation
    result = build_partition_change(TOPIC, 0, partition, live.__contains__, target)
    if result is None:
        return
    after = partition.merge(result.record)
    named = result.record.leader != NO_LEADER_CHANGE
    assert after.partition_epoch == partition.partition_epoch + 1
    assert after.leader_epoch == partition.leader_epoch + named
    assert named == (after.leader != partition.leader)  # replicas are unchanged here
    assert after.isr  # never empty
    if after.leader == NO_LEADER:
        wanted = partition.isr if target.isr is None else target.isr
        assert not live & set(wanted)
        if target.election is Election.UNCLEAN:
            assert not live & set(partition.replicas)
    else:
        assert after.leader in live
        # as in Kafka, a target ISR without the live leader can leave it leading outside the
        # ISR when no one else qualifies (callers never ask for that: a leader's AlterPartition
        # keeps itself in the ISR, a leaving broker is not acceptable)
        assert after.leader in after.isr or not named
    if result.unclean:
        assert target.election is Election.UNCLEAN and after.isr == (after.leader,)
        assert after.leader_recovery_state is RECOVERING
