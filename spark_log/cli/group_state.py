"""A consumer group as the `groups` commands see it, read through the AdminClient: state,
coordinator, members with their assignments, committed offsets, and the partitions' log start
and end offsets (what lag is measured against, as kafka-consumer-groups measures it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .connect import wait
from .errors import CliError

TP = tuple[str, int]
# Kafka's names for the states (ConsumerGroupState in its admin client).
STATE_NAMES = {ConsumerGroupState.UNKNOWN: "Unknown",
               ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
               ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
               ConsumerGroupState.STABLE: "Stable", ConsumerGroupState.DEAD: "Dead",
               ConsumerGroupState.EMPTY: "Empty"}
INACTIVE = frozenset({"Empty", "Dead"})


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    partitions: list[TP]


@dataclass
class GroupView:
    group_id: str
    state: str
    assignor: str
    coordinator: str
    coordinator_id: int
    members: list[Member]
    committed: dict[TP, int] = field(default_factory=dict)

    @property
    def is_active(self) -> bool:
        return self.state not in INACTIVE

    def owner(self, tp: TP) -> Member | None:
        return next((m for m in self.members if tp in m.partitions), None)


def state_name(state: Any) -> str:
    return STATE_NAMES.get(state, str(state))


def group_ids(admin: Any) -> list[tuple[str, str]]:
    """(group id, state) of every group, sorted by id."""
    result = wait(admin.list_consumer_groups(), "listing consumer groups")
    return sorted((g.group_id, state_name(g.state)) for g in result.valid)


def load_group(admin: Any, group_id: str) -> GroupView:
    """The group with its committed offsets; CliError if the group does not exist."""
    described = wait(admin.describe_consumer_groups([group_id])[group_id],
                     f"describing group {group_id!r}")
    committed = committed_offsets(admin, group_id)
    state = state_name(described.state)
    if state == "Dead" and not committed and not described.members:
        raise CliError(f"consumer group {group_id!r} does not exist")
    members = [Member(m.member_id, m.client_id, m.host, m.group_instance_id,
                      sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
               for m in described.members]
    node = described.coordinator
    return GroupView(group_id, state, described.partition_assignor or "",
                     f"{node.host}:{node.port}", node.id, members, committed)


def committed_offsets(admin: Any, group_id: str) -> dict[TP, int]:
    request = [ConsumerGroupTopicPartitions(group_id)]
    answer = wait(admin.list_consumer_group_offsets(request)[group_id],
                  f"fetching the offsets of group {group_id!r}")
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions
            if tp.offset >= 0 and tp.error is None}


def list_offsets(admin: Any, partitions: list[TP], spec: Any) -> dict[TP, int]:
    """One ListOffsets answer per partition (`OffsetSpec.latest()`, `earliest()`, ...)."""
    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions})
    return {(tp.topic, tp.partition): wait(f, f"listing offsets of {tp.topic}-{tp.partition}")
            .offset for tp, f in futures.items()}


def end_offsets(admin: Any, partitions: list[TP]) -> dict[TP, int]:
    return list_offsets(admin, partitions, OffsetSpec.latest())


def start_offsets(admin: Any, partitions: list[TP]) -> dict[TP, int]:
    return list_offsets(admin, partitions, OffsetSpec.earliest())
