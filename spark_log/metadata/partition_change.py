"""The PartitionChangeRecord a wanted change of a partition calls for (Kafka's
PartitionChangeBuilder), as a pure function, and the changes the controller wants most: a
broker leaving leadership (fenced or shutting down), a broker able to lead again, and leader
elections (preferred or unclean).

The rules are Kafka's: a leader is elected from the target ISR among acceptable (live) brokers,
in replica order, keeping the current leader while it qualifies (a preferred election tries
the first replica before it); an UNCLEAN election may fall back to any live replica, setting the
ISR to that leader alone and the leader recovery state to RECOVERING — possible data loss, so
the result says it was unclean and the caller logs it; no eligible replica alive leaves no
leader (-1). A reassignment completes once the ISR holds every target replica. An empty target
ISR is never written (the last ISR member stays in it). The record names a leader whenever the
leader changes or a reassignment drops a replica, which raises the leader epoch when applied;
every record raises the partition epoch. Nothing to change gives None.

Eligible leader replicas (KIP-966) and log-directory assignment are not used: records from
here leave the ELR empty and directories unassigned. The ISR shrink does not raise the leader
epoch (Kafka's rule since metadata version 3.6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from uuid import UUID

from .broker_registration import BrokerRegistration
from .partition_registration import (
    LEADER_RECOVERY_NO_CHANGE,
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionRegistration,
)
from .records import PartitionChangeRecord

__all__ = [
    "Election",
    "PartitionChangeResult",
    "TargetChange",
    "acceptable_leaders",
    "build_partition_change",
    "change_for_broker_joining",
    "change_for_broker_leaving",
    "elect_leader",
    "is_no_op",
]

AcceptableLeader = Callable[[int], bool]


class Election(Enum):
    """PREFERRED: the first replica if it qualifies; ONLINE: keep the partition led from the
    ISR; UNCLEAN: as ONLINE, else any live replica (unclean.leader.election.enable)."""

    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(frozen=True)
class TargetChange:
    """What the caller wants of a partition; None keeps the partition's current value."""

    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: LeaderRecoveryState | None = None
    election: Election = Election.ONLINE


@dataclass(frozen=True)
class PartitionChangeResult:
    """The record to write; `unclean` when its leader comes from outside the ISR."""

    record: PartitionChangeRecord
    unclean: bool = False


def acceptable_leaders(brokers: Mapping[int, BrokerRegistration], exclude: int = NO_LEADER,
                       include: int = NO_LEADER) -> AcceptableLeader:
    """Brokers that may lead: active ones (registered, unfenced, not shutting down), without
    `exclude` (a broker being fenced), with `include` (a broker being unfenced)."""
    def acceptable(broker_id: int) -> bool:
        if broker_id == exclude:
            return False
        broker = brokers.get(broker_id)
        return broker_id == include or (broker is not None and broker.is_active)
    return acceptable


def build_partition_change(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    is_acceptable_leader: AcceptableLeader,
    target: TargetChange | None = None,
) -> PartitionChangeResult | None:
    """The change record `target` calls for, or None when nothing would change."""
    plan = _Plan(partition, target or TargetChange())
    plan.complete_reassignment()
    record: dict[str, object] = {}
    leader, unclean = plan.elect(is_acceptable_leader)
    if leader != partition.leader:
        record["leader"] = leader
        if unclean:
            record["isr"] = (leader,)
            if partition.leader_recovery_state is not LeaderRecoveryState.RECOVERING:
                record["leader_recovery_state"] = int(LeaderRecoveryState.RECOVERING)
    if "leader" not in record and not set(partition.replicas) <= set(plan.replicas):
        record["leader"] = partition.leader  # a replica leaves: fence it by a new leader epoch
    if partition.elr:
        record["eligible_leader_replicas"] = ()
    if "isr" not in record and plan.isr and plan.isr != partition.isr:
        record["isr"] = plan.isr
    if plan.replicas and plan.replicas != partition.replicas:
        record["replicas"] = plan.replicas
    if plan.removing != partition.removing_replicas:
        record["removing_replicas"] = plan.removing
    if plan.adding != partition.adding_replicas:
        record["adding_replicas"] = plan.adding
    if plan.recovery is not partition.leader_recovery_state:
        record["leader_recovery_state"] = int(plan.recovery)
    if not record:
        return None
    change = PartitionChangeRecord(topic_id=topic_id, partition_id=partition_id, **record)
    return PartitionChangeResult(change, unclean and "leader" in record)


class _Plan:
    """The targets of a change, as Kafka's builder refines them before writing the record."""

    def __init__(self, partition: PartitionRegistration, target: TargetChange) -> None:
        self.partition = partition
        self.election = target.election
        self.isr = _or(target.isr, partition.isr)
        self.replicas = _or(target.replicas, partition.replicas)
        self.removing = _or(target.removing_replicas, partition.removing_replicas)
        self.adding = _or(target.adding_replicas, partition.adding_replicas)
        self.recovery = (partition.leader_recovery_state if target.leader_recovery_state is None
                         else target.leader_recovery_state)

    def complete_reassignment(self) -> None:
        """Finish a reassignment whose target replicas are all in the ISR: drop the removed
        replicas from the replicas and the ISR, clear adding and removing."""
        if not (self.removing or self.adding):
            return
        isr, replicas = self.isr, self.replicas
        if self.removing:
            isr = tuple(r for r in isr if r not in self.removing)
            replicas = tuple(r for r in replicas if r not in self.removing)
            if not isr or not replicas:
                return
        if not set(replicas) <= set(isr):
            return
        self.isr, self.replicas, self.removing, self.adding = isr, replicas, (), ()

    def elect(self, acceptable: AcceptableLeader) -> tuple[int, bool]:
        """(leader, unclean): the partition's leader after the change."""
        def valid(replica: int) -> bool:
            return replica in self.isr and acceptable(replica)

        current = self.partition.leader
        if self.election is Election.PREFERRED and self.replicas and valid(self.replicas[0]):
            return self.replicas[0], False
        if valid(current):
            return current, False
        clean = next((r for r in self.replicas if valid(r)), None)
        if clean is not None:
            return clean, False
        if self.election is Election.UNCLEAN:
            live = next((r for r in self.replicas if acceptable(r)), None)
            if live is not None:
                return live, True
        return NO_LEADER, False


def _or(value: tuple[int, ...] | None, default: tuple[int, ...]) -> tuple[int, ...]:
    return default if value is None else tuple(value)


def change_for_broker_leaving(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    brokers: Mapping[int, BrokerRegistration],
    broker_id: int,
    unclean_leader_election: bool = False,
) -> PartitionChangeResult | None:
    """`broker_id` is being fenced or shut down: it leaves the ISR (unless it is the last
    member) and leadership; a new leader is elected from the rest."""
    election = Election.UNCLEAN if unclean_leader_election else Election.ONLINE
    target = TargetChange(isr=tuple(r for r in partition.isr if r != broker_id),
                          election=election)
    return build_partition_change(topic_id, partition_id, partition,
                                  acceptable_leaders(brokers, exclude=broker_id), target)


def change_for_broker_joining(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    brokers: Mapping[int, BrokerRegistration],
    broker_id: int,
    unclean_leader_election: bool = False,
) -> PartitionChangeResult | None:
    """`broker_id` is being unfenced (the image still shows it fenced): a partition without a
    leader may elect it."""
    election = Election.UNCLEAN if unclean_leader_election else Election.ONLINE
    return build_partition_change(topic_id, partition_id, partition,
                                  acceptable_leaders(brokers, include=broker_id),
                                  TargetChange(election=election))


def elect_leader(
    topic_id: UUID,
    partition_id: int,
    partition: PartitionRegistration,
    brokers: Mapping[int, BrokerRegistration],
    election: Election,
) -> PartitionChangeResult | None:
    """An ElectLeaders election. None when it changes nothing: Kafka answers
    ELECTION_NOT_NEEDED when the preferred replica already leads (PREFERRED) or the partition
    has a leader (UNCLEAN), else PREFERRED_LEADER_NOT_AVAILABLE or
    ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    return build_partition_change(topic_id, partition_id, partition, acceptable_leaders(brokers),
                                  TargetChange(election=election))


def is_no_op(record: PartitionChangeRecord) -> bool:
    """True when applying `record` would change nothing but the partition epoch."""
    return (record.leader == NO_LEADER_CHANGE
            and record.leader_recovery_state == LEADER_RECOVERY_NO_CHANGE
            and all(value is None for value in (
                record.isr, record.replicas, record.removing_replicas, record.adding_replicas,
                record.directories, record.eligible_leader_replicas, record.last_known_elr)))
