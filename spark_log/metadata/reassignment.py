"""Partition reassignment (KIP-455 as Kafka's controller runs it): the change that starts moving
a partition to target replicas, and the change that cancels a move in progress.

A move first widens the replicas to target + removed ones, marking which are being added and
removed; the partition keeps its leader and ISR while the new replicas catch up. When the ISR
holds every target replica, the next change of the partition (see `partition_change`) drops the
removed replicas and completes the move. A move that only reorders replicas, or whose targets
are all in the ISR already, completes at once. A move submitted while another is in progress
replaces it: the widened replicas are recomputed from the current ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from uuid import UUID

from .broker_registration import BrokerRegistration
from .errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError
from .partition_change import (
    Election,
    PartitionChangeResult,
    TargetChange,
    acceptable_leaders,
    build_partition_change,
)
from .partition_registration import PartitionRegistration
from .replica_placement import validate_manual_assignment

__all__ = ["cancel_reassignment", "reassign"]


def reassign(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    target_replicas: Sequence[int],
    brokers: Mapping[int, BrokerRegistration],
) -> PartitionChangeResult | None:
    """The change that moves `partition` to `target_replicas` (or starts moving it).

    Raises `InvalidReplicaAssignmentError` for targets that are empty, repeat a broker or name
    an unregistered one.
    """
    validate_manual_assignment(target_replicas, brokers)
    target = tuple(target_replicas)
    removing = tuple(sorted(set(partition.replicas) - set(target)))
    # A new target replaces a move in progress: replicas it was adding that stay targets are
    # still catching up, so they stay marked as added (Kafka would keep the old markers).
    adding = tuple(sorted((set(target) - set(partition.replicas))
                          | (set(partition.adding_replicas) & set(target))))
    replicas = target + removing
    change = TargetChange(
        replicas=replicas if replicas != partition.replicas else None,
        removing_replicas=removing,
        adding_replicas=adding,
    )
    return build_partition_change(topic_id, partition_id, partition,
                                  acceptable_leaders(brokers), change)


def cancel_reassignment(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    brokers: Mapping[int, BrokerRegistration],
    unclean_leader_election: bool = False,
) -> PartitionChangeResult | None:
    """The change that reverts a move in progress: the replicas it was adding leave the
    replicas and the ISR. If only added replicas were in the ISR, the first original replica
    becomes the ISR, an unclean election Kafka allows only with unclean leader election on (the
    result then says it was unclean).

    Raises `NoReassignmentInProgressError` when the partition is not moving and
    `InvalidReplicaAssignmentError` when reverting would need a refused unclean election.
    """
    if not partition.is_reassigning:
        raise NoReassignmentInProgressError("No partition reassignment is in progress.")
    original = tuple(r for r in partition.replicas if r not in partition.adding_replicas)
    isr = tuple(r for r in partition.isr if r not in partition.adding_replicas)
    forced = not isr
    if forced:
        if not original:
            raise InvalidReplicaAssignmentError(
                "Invalid replica assignment: addingReplicas contains all replicas.")
        if not unclean_leader_election:
            raise InvalidReplicaAssignmentError(
                f"Unable to revert partition assignment for {topic_id}:{partition_id} because "
                "it would require an unclean leader election.")
        isr = original[:1]
    change = TargetChange(
        isr=isr, replicas=original, removing_replicas=(), adding_replicas=(),
        election=Election.UNCLEAN if unclean_leader_election else Election.ONLINE)
    result = build_partition_change(topic_id, partition_id, partition,
                                    acceptable_leaders(brokers), change)
    if result is not None and forced:  # its leader comes from outside the ISR
        result = replace(result, unclean=True)
    return result
