"""The classic rebalance protocol over time: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
timeouts that drive a group between its states (Kafka's GroupMetadataManager, classic part).

A rebalance: PreparingRebalance collects JoinGroups (parked until every member has rejoined,
the rebalance timeout passes, or — for a new group — `group.initial.rebalance.delay.ms` passes
without new members); completing the join phase bumps the generation, picks the protocol by
vote and answers every parked JoinGroup (the leader gets the members' metadata); in
CompletingRebalance followers park their SyncGroup until the leader's SyncGroup brings the
assignment, which is persisted and handed out; the group is then Stable. Session timeouts
remove silent members, the rebalance timeout bounds both phases, and a static member
(`group.instance.id`) that comes back with a new member id takes over its old identity and
assignment without a rebalance.

Replies to parked requests go through `Responder` callbacks; everything else returns at once.
The group's metadata record is written through `GroupStore.store_group`, which raises
`KafkaError` (with the code the client should see) when it cannot be written. Requests, replies
and settings are defined in `group_requests`.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group import ClassicGroup, GroupMember, GroupState, Protocols, Responder
from spark_log.broker.group.group_requests import (
    GroupSettings,
    GroupStore,
    JoinRequest,
    join_error,
    sync_error,
)
from spark_log.broker.group.group_timer import CoordinatorTimer
from spark_log.clock import Clock
from spark_log.protocol import ErrorCode

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
SKIP_ASSIGNMENT_FROM_VERSION = 9
MEMBER_ID_REQUIRED_FROM_VERSION = 4

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD)


def heartbeat_key(group_id: str, member_id: str) -> str:
    # the group id's length keeps ("a-b", "c") and ("a", "b-c") apart
    return f"heartbeat:{len(group_id)}:{group_id}:{member_id}"


def _join_key(group_id: str) -> str:
    return f"join:{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync:{group_id}"


class RebalanceProtocol:
    """Drives the groups in `groups` (shared with the coordinator, which creates and deletes
    them too). Invariant: a member of a non-Dead group has a heartbeat deadline scheduled
    unless it is parked in a JoinGroup or SyncGroup; every parked reply is answered exactly
    once. Event-loop only."""

    def __init__(self, groups: dict[str, ClassicGroup], store: GroupStore,
                 timer: CoordinatorTimer, clock: Clock, settings: GroupSettings) -> None:
        self.groups = groups
        self.store = store
        self.timer = timer
        self.clock = clock
        self.settings = settings

    # ---- JoinGroup --------------------------------------------------------------------------
    def join(self, req: JoinRequest, respond: Responder) -> None:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                respond(join_error(ErrorCode.unknown_member_id, req.member_id))
                return
            group = self._create_group(req.group_id, respond)
            if group is None:
                return
        if not self._accepts_joining_member(group, req.member_id):
            group.remove(req.member_id)
            respond(join_error(ErrorCode.group_max_size_reached))
        elif not req.member_id:
            self._join_new_member(group, req, respond)
        else:
            self._join_existing_member(group, req, respond)

    def _create_group(self, group_id: str, respond: Responder) -> ClassicGroup | None:
        group = ClassicGroup(group_id, state_timestamp=self.clock.now_ms())
        try:
            self.store.store_group(group, {})
        except KafkaError as e:
            respond(join_error(e.code))
            return None
        self.groups[group_id] = group
        return group

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.settings.max_size
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or \
                group.awaiting_join_count < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, respond: Responder) -> None:
        if group.is_in(DEAD):
            respond(join_error(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            respond(join_error(ErrorCode.inconsistent_group_protocol))
            return
        new_id = ClassicGroup.new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                log.info("Group %s: static member %s rejoins as %s, replacing %s", group.group_id,
                         req.group_instance_id, new_id, existing)
                self._replace_static_member(group, req, existing, new_id, respond)
            else:
                self._add_member_and_rebalance(group, req, new_id, respond)
        elif req.api_version >= MEMBER_ID_REQUIRED_FROM_VERSION:
            group.add_pending_member(new_id)
            self.timer.schedule(heartbeat_key(group.group_id, new_id), req.session_timeout_ms,
                                lambda gid=group.group_id: self._expire_heartbeat(gid, new_id))
            respond(join_error(ErrorCode.member_id_required, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, respond)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest,
                              respond: Responder) -> None:
        member_id = req.member_id
        if group.is_in(DEAD):
            respond(join_error(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            respond(join_error(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_join:
            if req.group_instance_id is not None:
                respond(join_error(ErrorCode.unknown_server_error, member_id))
                return
            self._add_member_and_rebalance(group, req, member_id, respond)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as e:
            respond(join_error(e.code, member_id))
            return
        member = group.member(member_id)
        unchanged = member.protocols == req.protocols
        if group.is_in(PREPARING) or (group.is_in(COMPLETING) and not unchanged) or \
                (group.is_in(STABLE) and (group.is_leader(member_id) or not unchanged)):
            group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                                req.session_timeout_ms, respond)
            self._rebalance_or_complete_join(
                group, f"member {member_id} rejoins; client reason: {req.reason}")
        elif group.is_in(COMPLETING, STABLE):
            # the same metadata again (a lost JoinGroup reply): the current generation
            respond(self._generation_reply(group, member_id, group.is_in(COMPLETING)))
        else:
            respond(join_error(ErrorCode.unknown_member_id, member_id))

    def _generation_reply(self, group: ClassicGroup, member_id: str, with_members: bool,
                          leader: str | None = None, skip: bool = False) -> dict[str, Any]:
        members = group.current_members_for_leader() \
            if with_members and group.is_leader(member_id) else []
        return {"error_code": ErrorCode.none, "generation_id": group.generation,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": (leader if leader is not None else group.leader_id) or "",
                "skip_assignment": skip, "member_id": member_id, "members": members}

    def _add_member_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                                  respond: Responder) -> None:
        member = GroupMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                             req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                             req.protocols, is_new=True)
        if group.is_in(PREPARING) and group.previous_state == EMPTY:
            group.new_member_added = True
        group.add(member, respond)
        # a parked new member cannot heartbeat: bound its wait instead of its session
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance_or_complete_join(
            group, f"new member {member_id} joins; client reason: {req.reason}")

    def _replace_static_member(self, group: ClassicGroup, req: JoinRequest, old_id: str,
                               new_id: str, respond: Responder) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        leader_before = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, respond)
        if group.is_in(COMPLETING):
            # the leader may already hold the old member id: assign again
            self._prepare_rebalance(group, f"static member {instance_id} rejoins")
        elif not group.is_in(STABLE):
            self._maybe_complete_join(group)
        elif group.protocol_name != group.select_protocol():
            self._rebalance_or_complete_join(group, f"static member {instance_id} changes the "
                                                    "group protocol")
        else:
            self._keep_static_member(group, member, old_id, leader_before, before, req, respond)

    def _keep_static_member(self, group: ClassicGroup, member: GroupMember, old_id: str,
                            leader_before: str | None, before: tuple[Protocols, int, int],
                            req: JoinRequest, respond: Responder) -> None:
        """A static member back in a Stable group: persist its new id, no rebalance."""
        new_id = member.member_id
        try:
            self.store.store_group(group, group.assignments())
        except KafkaError as e:
            group.update_member(member, before[0], before[1], before[2], None)
            old = group.replace_static_member(member.group_instance_id or "", new_id, old_id)
            self._schedule_heartbeat(group, old)
            reply = self._generation_reply(group, "", False, leader_before)
            respond({**reply, "error_code": e.code})
            return
        if req.api_version >= SKIP_ASSIGNMENT_FROM_VERSION:
            is_leader = group.is_leader(new_id)
            reply = self._generation_reply(group, new_id, True, skip=is_leader)
        else:  # the old leader id makes a returning leader act as a follower: no reassignment
            reply = self._generation_reply(group, new_id, False, leader_before)
        group.complete_join(member, reply)

    # ---- rebalancing ------------------------------------------------------------------------
    def _rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_in(PREPARING) and group.previous_state != EMPTY and \
                group.has_all_members_joined():
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(COMPLETING):
            self._reset_assignments(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        self.timer.cancel(sync_key(group.group_id))
        initial = group.is_in(EMPTY)
        if initial:
            delay = self.settings.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group.group_id, delay, remaining)
        log.info("Preparing to rebalance group %s in state %s with old generation %d (reason: "
                 "%s)", group.group_id, group.state.value, group.generation, reason)
        group.transition_to(PREPARING, self.clock.now_ms())
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule_join_completion(group)

    def _schedule_initial_join(self, group_id: str, delay: int, remaining: int) -> None:
        self.timer.schedule(_join_key(group_id), delay,
                            lambda: self._initial_delay_over(group_id, delay, remaining))

    def _schedule_join_completion(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timer.schedule(_join_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self._complete_join_of(group_id))

    def _initial_delay_over(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining:
            group.new_member_added = False
            next_delay = min(self.settings.initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group_id, next_delay, max(remaining - delay, 0))
        else:
            self._complete_join(group)

    def _complete_join_of(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation and answer every parked JoinGroup."""
        self.timer.cancel(_join_key(group.group_id))
        for gone in [m for m in group.not_yet_rejoined() if m.group_instance_id is None]:
            group.remove(gone.member_id)
            self.timer.cancel(heartbeat_key(group.group_id, gone.member_id))
            log.info("Group %s removed member %s, which did not rejoin", group.group_id,
                     gone.member_id)
        if group.is_in(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._schedule_join_completion(group)
            return
        group.init_next_generation(self.clock.now_ms())
        if group.is_in(EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation)
            try:
                self.store.store_group(group, {})
            except KafkaError as e:
                log.warning("Failed to write the metadata of empty group %s: %s", group.group_id,
                            e.code.name)
            return
        log.info("Stabilized group %s generation %d (protocol %s) with %d members",
                 group.group_id, group.generation, group.protocol_name, len(group.members))
        for member in list(group.members.values()):
            group.complete_join(member, self._generation_reply(group, member.member_id, True))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group_id, generation = group.group_id, group.generation
        self.timer.schedule(sync_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(group_id, generation))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation or \
                not group.is_in(COMPLETING, STABLE) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for member_id in late:
            self._drop_parked(group, member_id)
            group.remove(member_id)
            self.timer.cancel(heartbeat_key(group_id, member_id))
        self._prepare_rebalance(group, f"members {late} sent no SyncGroup in time")

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return
        if member_id in group.pending_join:
            log.info("Group %s: pending member %s expired", group_id, member_id)
            group.remove(member_id)
            if group.is_in(PREPARING) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("Group %s: member %s failed (session timeout), removing it", group_id,
                     member_id)
            self._drop_parked(group, member_id)
            group.remove(member_id)
            if group.is_in(STABLE, COMPLETING):
                self._rebalance_or_complete_join(group, f"member {member_id} expired")
            elif group.is_in(PREPARING) and group.has_all_members_joined():
                self._complete_join(group)

    def _schedule_heartbeat(self, group: ClassicGroup, member: GroupMember,
                            timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timer.schedule(heartbeat_key(group_id, member_id),
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_heartbeat(group_id, member_id))

    def _drop_parked(self, group: ClassicGroup, member_id: str) -> None:
        """Answer a leaving member's parked requests with UNKNOWN_MEMBER_ID."""
        member = group.members.get(member_id)
        if member is not None:
            group.complete_join(member, join_error(ErrorCode.unknown_member_id))
            group.complete_sync(member, sync_error(ErrorCode.unknown_member_id))

    def _reset_assignments(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error)

    def _propagate(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in list(group.members.values()):
            reply = {"error_code": error,
                     "protocol_type": group.protocol_type if ok else None,
                     "protocol_name": group.protocol_name if ok else None,
                     "assignment": member.assignment}
            if group.complete_sync(member, reply):
                self._schedule_heartbeat(group, member)
