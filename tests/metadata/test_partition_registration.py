"""A partition's registration: built from a PartitionRecord, changed by PartitionChangeRecords
with Kafka's epoch rules (NO_LEADER_CHANGE keeps the leader epoch, any leader named bumps it,
every change bumps the partition epoch), written back as the same PartitionRecord."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.partition_registration import (
    MIGRATING_DIRECTORY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionRegistration,
)
from spark_log.metadata.records import PartitionChangeRecord, PartitionRecord
from tests.metadata.strategies import records

TOPIC = uuid.UUID(int=5)
DIR_A, DIR_B = uuid.UUID(int=11), uuid.UUID(int=12)
BASE = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4,
                             partition_epoch=7)


def merged(**fields):
    return BASE.merge(PartitionChangeRecord(topic_id=TOPIC, partition_id=0, **fields))


def test_no_leader_change_keeps_the_leader_and_its_epoch():
    after = merged(isr=(1, 2))
    assert (after.leader, after.leader_epoch, after.partition_epoch) == (1, 4, 8)
    assert after.isr == (1, 2) and after.replicas == (1, 2, 3)
    assert PartitionChangeRecord().leader == NO_LEADER_CHANGE


def test_naming_a_leader_bumps_the_leader_epoch_even_the_same_one():
    assert (merged(leader=2).leader, merged(leader=2).leader_epoch) == (2, 5)
    assert (merged(leader=1).leader, merged(leader=1).leader_epoch) == (1, 5)
    no_leader = merged(leader=NO_LEADER)
    assert (no_leader.leader, no_leader.leader_epoch, no_leader.has_leader) == (-1, 5, False)


def test_every_change_bumps_the_partition_epoch_even_an_empty_one():
    assert merged() == BASE.with_changes(partition_epoch=8)


def test_leader_recovery_state_changes_only_when_named():
    recovering = merged(leader=3, isr=(3,), leader_recovery_state=1)
    assert recovering.leader_recovery_state is LeaderRecoveryState.RECOVERING
    still = recovering.merge(PartitionChangeRecord(topic_id=TOPIC, isr=(3, 1)))
    assert still.leader_recovery_state is LeaderRecoveryState.RECOVERING
    done = still.merge(PartitionChangeRecord(topic_id=TOPIC, leader_recovery_state=0))
    assert done.leader_recovery_state is LeaderRecoveryState.RECOVERED
    with pytest.raises(ValueError, match="not a valid leader recovery state"):
        merged(leader_recovery_state=2)


def test_reassignment_fields_and_unassigned_directories_follow_the_replicas():
    moving = merged(replicas=(1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(3,))
    assert moving.is_reassigning and moving.directories == (MIGRATING_DIRECTORY,) * 4
    done = moving.merge(PartitionChangeRecord(topic_id=TOPIC, replicas=(1, 2, 4),
                                              adding_replicas=(), removing_replicas=()))
    assert not done.is_reassigning and len(done.directories) == 3


def test_assigned_directories_must_match_the_replicas():
    placed = merged(replicas=(1, 2), directories=(DIR_A, DIR_B))
    assert placed.directories == (DIR_A, DIR_B)
    with pytest.raises(ValueError, match="2 directories for 3 replicas"):
        placed.merge(PartitionChangeRecord(topic_id=TOPIC, replicas=(1, 2, 3)))


def test_preferred_replica_is_the_first():
    assert BASE.preferred_replica == 1 and BASE.has_preferred_leader
    assert not merged(leader=2).has_preferred_leader
    assert PartitionRegistration(replicas=(), isr=(), leader=-1).preferred_replica == NO_LEADER


@given(records(PartitionRecord, 2))
def test_a_partition_record_round_trips_through_the_registration(record):
    if record.leader_recovery_state not in (0, 1) or (
            record.directories and len(record.directories) != len(record.replicas)):
        with pytest.raises(ValueError):
            PartitionRegistration.from_record(record)
        return
    registration = PartitionRegistration.from_record(record)
    again = PartitionRegistration.from_record(registration.to_record(TOPIC, 3))
    assert again == registration
    written = registration.to_record(TOPIC, 3)
    assert (written.topic_id, written.partition_id) == (TOPIC, 3)
    assert written.eligible_leader_replicas == (record.eligible_leader_replicas or None)


@settings(max_examples=200, deadline=None)
@given(st.builds(
    PartitionChangeRecord, topic_id=st.just(TOPIC),
    isr=st.none() | st.lists(st.integers(1, 4), max_size=4).map(tuple),
    leader=st.sampled_from([NO_LEADER_CHANGE, NO_LEADER, 1, 2, 3]),
    replicas=st.none() | st.just((1, 2, 3, 4)),
    eligible_leader_replicas=st.none() | st.just((2,)),
    leader_recovery_state=st.sampled_from([-1, 0, 1])))
def test_a_merge_equals_the_registration_built_with_its_checks(record):
    after = BASE.merge(record)
    checked = PartitionRegistration(*after)
    assert after == checked and type(after) is PartitionRegistration
    assert hash(after) == hash(checked)
    with pytest.raises(AttributeError):
        after.leader = 9  # type: ignore[misc]
