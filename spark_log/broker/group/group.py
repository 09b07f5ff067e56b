"""A classic consumer group: its members, generation, protocol and state (Kafka's ClassicGroup).

This module owns the group as data and the rules that only look at the group: which state may
follow which, protocol selection by votes, static-member bookkeeping, member validation, and the
checks an offset commit must pass. Driving it over time (joins, syncs, timeouts) is
`group_rebalance`; persisting it is the coordinator's. Protocols and assignments are opaque bytes,
except that the subscribed topics of a `consumer` group are read from the version-0 prefix of
its members' subscriptions (for OffsetDelete and offset expiry), as Kafka does.

Nothing here does I/O or reads a clock: times are passed in.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from spark_log.broker.errors import KafkaError
from spark_log.protocol import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"

Responder = Callable[[dict[str, Any]], None]
Protocols = tuple[tuple[str, bytes], ...]


class GroupState(Enum):
    """Kafka's classic group states; `value` is the name DescribeGroups/ListGroups show."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(eq=False)
class GroupMember:
    """One member. `awaiting_join`/`awaiting_sync` hold the parked JoinGroup/SyncGroup reply
    callbacks; a member is "awaiting join" exactly while `awaiting_join` is set."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    is_new: bool = False
    awaiting_join: Responder | None = None
    awaiting_sync: Responder | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first protocol of this member's preference list among `candidates`."""
        return next(name for name in self.protocol_names() if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry may be ignored: members parked in a rebalance count as
        alive, except new members (their join may be abandoned)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(eq=False)
class ClassicGroup:
    """Invariants: `static_members` maps each instance id to the id of a member in `members`;
    `pending_join` ids are not in `members`; `pending_sync` ids are; `protocol_counts[p]` is
    the number of members listing protocol p; `leader_id` is None exactly when there are no
    members; `awaiting_join_count` counts members with a parked JoinGroup."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    state_timestamp: int | None = None
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, GroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    protocol_counts: Counter[str] = field(default_factory=Counter)
    awaiting_join_count: int = 0
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None

    # ---- state ------------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: invalid transition {self.state.value} -> "
                               f"{state.value}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def is_empty(self) -> bool:
        return self.state == GroupState.EMPTY

    # ---- members ----------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> GroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: GroupMember, responder: Responder | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in "
                                   f"group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.protocol_counts.update(member.protocol_names())
        member.awaiting_join = responder
        if responder is not None:
            self.awaiting_join_count += 1
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.protocol_counts.subtract(removed.protocol_names())
            if removed.awaiting_join is not None:
                self.awaiting_join_count -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(self, member: GroupMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, responder: Responder | None) -> None:
        self.protocol_counts.subtract(member.protocol_names())
        member.protocols = protocols
        self.protocol_counts.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if responder is not None and member.awaiting_join is None:
            self.awaiting_join_count += 1
        elif responder is None and member.awaiting_join is not None:
            self.awaiting_join_count -= 1
        member.awaiting_join = responder

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> GroupMember:
        """Give static member `instance_id` the member id `new_id`, fencing any request the old
        id has parked. The member keeps its protocols and assignment."""
        old = self.members.pop(old_id)
        self.complete_join(old, fenced_join_response(old_id))
        self.complete_sync(old, {"error_code": ErrorCode.fenced_instance_id,
                                 "protocol_type": None, "protocol_name": None,
                                 "assignment": b""})
        new = GroupMember(new_id, old.group_instance_id, old.client_id, old.client_host,
                          old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                          old.protocols, old.assignment)
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def add_pending_member(self, member_id: str) -> None:
        assert member_id not in self.members
        self.pending_join.add(member_id)

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_join

    def not_yet_rejoined(self) -> list[GroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, or hand leadership to a member that did; False when
        no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            log.info("Group %s: leader %s failed to rejoin and no other member did", self.group_id,
                     self.leader_id)
            return False
        log.info("Group %s: leader %s failed to rejoin; %s is the new leader", self.group_id,
                 self.leader_id, joined.member_id)
        self.leader_id = joined.member_id
        return True

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """FENCED_INSTANCE_ID for a static member's stale id, UNKNOWN_MEMBER_ID for a stranger."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise KafkaError(ErrorCode.unknown_member_id)
            if existing != member_id:
                log.info("Group %s: member %s of static instance %s is fenced by %s",
                         self.group_id, member_id, instance_id, existing)
                raise KafkaError(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            raise KafkaError(ErrorCode.unknown_member_id)

    @staticmethod
    def new_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    # ---- replies ----------------------------------------------------------------------------
    def complete_join(self, member: GroupMember, response: dict[str, Any]) -> bool:
        responder = member.awaiting_join
        if responder is None:
            return False
        member.awaiting_join = None
        self.awaiting_join_count -= 1
        responder(response)
        return True

    def complete_sync(self, member: GroupMember, response: dict[str, Any]) -> bool:
        responder = member.awaiting_sync
        if responder is None:
            return False
        member.awaiting_sync = None
        responder(response)
        return True

    # ---- protocols --------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.protocol_counts.items() if count == size}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = list(names)
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and \
            any(self.protocol_counts.get(n, 0) == size for n in names)

    def select_protocol(self) -> str:
        """The protocol all members support that most members prefer; ties go to the
        earliest-joined member's preference."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(p for p in votes if votes[p] == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, or None when unknown (not a consumer group,
        or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset(t for m in self.members.values()
                             for t in subscription_topics(m.metadata(self.protocol_name)))
        except ValueError as e:
            log.warning("Group %s: cannot read the consumer subscriptions: %s", self.group_id, e)
            return None

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def current_members_for_leader(self) -> list[dict[str, Any]]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # ---- offset commits ---------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               transactional: bool) -> None:
        """Kafka's checks of a (transactional) offset commit against this group."""
        if self.state == GroupState.DEAD:
            raise KafkaError(ErrorCode.coordinator_not_available)
        if generation < 0 and self.state == GroupState.EMPTY:
            return  # a simple consumer (or the admin client) committing for an empty group
        if generation >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation != self.generation:
                raise KafkaError(ErrorCode.illegal_generation)
        elif not transactional and self.state != GroupState.EMPTY:
            raise KafkaError(ErrorCode.unknown_member_id)
        if not transactional and self.state == GroupState.COMPLETING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress)


def fenced_join_response(member_id: str) -> dict[str, Any]:
    return {"error_code": ErrorCode.fenced_instance_id, "generation_id": -1,
            "protocol_type": None, "protocol_name": None, "leader": "",
            "skip_assignment": False, "member_id": member_id, "members": []}


def subscription_topics(subscription: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (its version-0 prefix: version, topic array);
    ValueError if the bytes do not hold one."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            (size,) = struct.unpack_from(">h", subscription, pos)
            pos += 2
            if size < 0 or pos + size > len(subscription):
                raise ValueError("topic name runs past the end")
            topics.append(subscription[pos : pos + size].decode())
            pos += size
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"malformed consumer subscription: {e}") from None
