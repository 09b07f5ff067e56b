"""Striped, rack-aware replica placement: Kafka's own test vectors (with a port of its
MockRandom), Kafka's refusals and their messages, and properties of any placement."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.broker_registration import BrokerRegistration
from spark_log.metadata.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from spark_log.metadata.partition_registration import PartitionRegistration
from spark_log.metadata.records import ZERO_UUID
from spark_log.metadata.replica_placement import (
    UsableBroker,
    new_partition,
    place_replicas,
    usable_brokers,
    validate_manual_assignment,
)
from spark_log.protocol import ErrorCode
from tests.metadata.java_random import MockRandom


def place(brokers, partitions, replication_factor, rng=None):
    return place_replicas(brokers, partitions, replication_factor,
                          (rng or MockRandom()).next_int)


# ---- Kafka's vectors --------------------------------------------------------------------------

def test_avoids_a_fenced_broker_when_it_can():
    brokers = [UsableBroker(3), UsableBroker(1, fenced=True), UsableBroker(0), UsableBroker(4),
               UsableBroker(2)]
    assert place(brokers, 5, 4) == [(3, 4, 0, 2), (4, 0, 2, 3), (0, 2, 3, 4), (2, 3, 4, 0),
                                    (0, 4, 3, 2)]


def test_uses_a_fenced_broker_as_a_follower_when_it_must():
    brokers = [UsableBroker(3), UsableBroker(1, fenced=True), UsableBroker(2)]
    assert place(brokers, 4, 3) == [(3, 2, 1), (2, 3, 1), (3, 2, 1), (2, 3, 1)]


def test_one_unfenced_broker_takes_every_partition():
    assert place([UsableBroker(0), UsableBroker(1, fenced=True)], 3, 1) == [(0,), (0,), (0,)]


def test_racks_are_striped():
    brokers = [UsableBroker(11, "1"), UsableBroker(10, "1"), UsableBroker(30, "3"),
               UsableBroker(31, "3"), UsableBroker(21, "2"), UsableBroker(20, "2", fenced=True)]
    assert place(brokers, 3, 4) == [(11, 21, 31, 10), (21, 30, 10, 20), (31, 11, 21, 30)]


def test_racks_with_only_fenced_brokers_hold_followers():
    brokers = [UsableBroker(11, "1"), UsableBroker(10, "1"), UsableBroker(30, "3", True),
               UsableBroker(31, "3", True), UsableBroker(20, "2", True),
               UsableBroker(21, "2", True), UsableBroker(41, "4"), UsableBroker(40, "4", True)]
    assert place(brokers, 3, 4) == [(41, 11, 21, 30), (10, 20, 31, 41), (41, 21, 30, 11)]


def test_a_successful_placement():
    brokers = [UsableBroker(0), UsableBroker(3), UsableBroker(2), UsableBroker(1)]
    assert place(brokers, 5, 3) == [(2, 3, 0), (3, 0, 1), (0, 1, 2), (1, 2, 3), (1, 0, 2)]


def test_the_distribution_kafka_gets_for_200_partitions():
    counts = Counter(place([UsableBroker(n) for n in range(4)], 200, 2))
    assert counts == {(0, 1): 14, (0, 2): 22, (0, 3): 14, (1, 0): 17, (1, 2): 17, (1, 3): 16,
                      (2, 0): 13, (2, 1): 17, (2, 3): 20, (3, 0): 20, (3, 1): 19, (3, 2): 11}


@pytest.mark.parametrize(("brokers", "factor", "message"), [
    ([UsableBroker(11, "1", True), UsableBroker(10, "1", True)], 1,
     "All brokers are currently fenced."),
    ([UsableBroker(11, "1"), UsableBroker(10, "1")], 3,
     "The target replication factor of 3 cannot be reached because only 2 broker(s) are "
     "registered."),
    ([UsableBroker(11, "1"), UsableBroker(10, "1")], 0,
     "Invalid replication factor 0: the replication factor must be positive."),
    ([], 1, "All brokers are currently fenced."),
])
def test_refusals_carry_kafkas_message_and_error_code(brokers, factor, message):
    with pytest.raises(InvalidReplicationFactorError) as caught:
        place(brokers, 1, factor)
    assert str(caught.value) == message
    assert caught.value.error_code == ErrorCode.invalid_replication_factor


# ---- explicit assignments ---------------------------------------------------------------------

@pytest.mark.parametrize(("replicas", "factor", "message"), [
    ((), None, "The manual partition assignment includes an empty replica list."),
    ((1, 9), None, "The manual partition assignment includes broker 9, but no such broker is "
                   "registered."),
    ((2, 1, 2), None, "The manual partition assignment includes the broker 2 more than once."),
    ((1, 2), 3, "The manual partition assignment includes a partition with 2 replica(s), but "
                "this is not consistent with previous partitions, which have 3 replica(s)."),
])
def test_manual_assignments_are_checked_as_kafka_checks_them(replicas, factor, message):
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        validate_manual_assignment(replicas, {1, 2, 3}, factor)
    assert str(caught.value) == message
    assert caught.value.error_code == ErrorCode.invalid_replica_assignment


def test_a_good_manual_assignment_passes():
    validate_manual_assignment((3, 1), {1, 2, 3}, 2)
    validate_manual_assignment((3,), {1, 2, 3})


BROKERS = {n: BrokerRegistration(n, 1, ZERO_UUID, rack=f"r{n}", fenced=n == 2,
                                 in_controlled_shutdown=n == 3) for n in (1, 2, 3, 4)}


def test_usable_brokers_leave_out_those_shutting_down():
    assert usable_brokers(BROKERS) == [UsableBroker(1, "r1"), UsableBroker(2, "r2", True),
                                       UsableBroker(4, "r4")]


def test_a_new_partition_has_the_active_replicas_in_sync_and_the_first_leading():
    assert new_partition((2, 4, 3, 1), BROKERS) == PartitionRegistration(
        replicas=(2, 4, 3, 1), isr=(4, 1), leader=4, leader_epoch=0, partition_epoch=0)
    assert new_partition((2, 3), BROKERS) is None  # fenced and shutting down: Kafka refuses


# ---- properties -------------------------------------------------------------------------------

cluster = st.lists(st.tuples(st.sampled_from([None, "a", "b", "c"]), st.booleans()),
                   min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(cluster, st.integers(1, 60), st.integers(1, 6), st.randoms(use_true_random=False))
def test_every_partition_gets_distinct_brokers_and_an_unfenced_leader(spec, partitions, factor,
                                                                      rng):
    brokers = [UsableBroker(n, rack, fenced) for n, (rack, fenced) in enumerate(spec)]
    unfenced = {b.id for b in brokers if not b.fenced}
    if factor > len(brokers) or not unfenced:
        with pytest.raises(InvalidReplicationFactorError):
            place_replicas(brokers, partitions, factor, rng.randrange)
        return
    placement = place_replicas(brokers, partitions, factor, rng.randrange)
    assert len(placement) == partitions
    for replicas in placement:
        assert len(set(replicas)) == factor == len(replicas)
        assert replicas[0] in unfenced


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 60), st.randoms(use_true_random=False),
       st.data())
def test_with_as_many_racks_as_replicas_each_replica_is_on_its_own_rack(
        racks, per_rack, partitions, rng, data):
    fenced = data.draw(st.lists(st.booleans(), min_size=racks * per_rack,
                                max_size=racks * per_rack))
    brokers = [UsableBroker(n, f"rack{n % racks}", fenced[n]) for n in range(racks * per_rack)]
    if all(fenced):
        return
    for replicas in place_replicas(brokers, partitions, racks, rng.randrange):
        assert len({brokers[b].rack for b in replicas}) == racks


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 200), st.data(), st.randoms(use_true_random=False))
def test_leaders_spread_within_one_of_even(count, partitions, data, rng):
    factor = data.draw(st.integers(1, count))
    placement = place_replicas([UsableBroker(n) for n in range(count)], partitions, factor,
                               rng.randrange)
    leaders = Counter(replicas[0] for replicas in placement)
    assert max(leaders.values()) - min(leaders.get(n, 0) for n in range(count)) <= 1
    # each run of `count` partitions puts `factor` replicas on every broker
    held = Counter(b for replicas in placement for b in replicas)
    assert max(held.values()) - min(held.get(n, 0) for n in range(count)) <= factor
    if partitions % count == 0:
        assert set(held.values()) == {partitions // count * factor}


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 100), st.randoms(use_true_random=False))
def test_with_equal_racks_leaders_spread_within_one_of_even_over_racks(racks, per_rack,
                                                                       partitions, rng):
    brokers = [UsableBroker(n, f"r{n % racks}") for n in range(racks * per_rack)]
    factor = min(racks, 3)
    leaders = Counter(brokers[r[0]].rack for r in place_replicas(brokers, partitions, factor,
                                                                 rng.randrange))
    assert max(leaders.values()) - min(leaders.get(f"r{n}", 0) for n in range(racks)) <= 1


def test_placement_depends_only_on_the_injected_randomness():
    brokers = [UsableBroker(n, f"r{n % 3}") for n in range(9)]
    first = place_replicas(brokers, 30, 3, random.Random(5).randrange)
    assert place_replicas(brokers, 30, 3, random.Random(5).randrange) == first
