"""SyncGroup, Heartbeat and LeaveGroup, and the group lifecycle hooks of the coordinator (load,
unload, activity from offset commits), on top of the join phase in `group_rebalance`.

Error precedence follows Kafka's: a Dead group answers COORDINATOR_NOT_AVAILABLE; then the
member must be known (UNKNOWN_MEMBER_ID) and, for a static member, be the instance's current id
(FENCED_INSTANCE_ID); then the generation must match (ILLEGAL_GENERATION); then the state
decides (REBALANCE_IN_PROGRESS while preparing a rebalance).
"""

from __future__ import annotations

import logging

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group import ClassicGroup, Responder
from spark_log.broker.group.group_rebalance import (
    COMPLETING,
    DEAD,
    PREPARING,
    STABLE,
    RebalanceProtocol,
    heartbeat_key,
    sync_key,
)
from spark_log.broker.group.group_requests import SyncRequest, join_error, sync_error
from spark_log.protocol import ErrorCode

log = logging.getLogger(__name__)


class GroupMembership(RebalanceProtocol):
    """The member-facing API of the classic protocol. Same invariants as `RebalanceProtocol`."""

    # ---- SyncGroup --------------------------------------------------------------------------
    def sync(self, req: SyncRequest, respond: Responder) -> None:
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty():
            respond(sync_error(ErrorCode.unknown_member_id))
            return
        error = self._sync_error(group, req)
        if error is not None:
            respond(sync_error(error))
        elif group.is_in(PREPARING):
            respond(sync_error(ErrorCode.rebalance_in_progress))
        elif group.is_in(COMPLETING):
            group.member(req.member_id).awaiting_sync = respond
            self._synced(group, req.member_id)
            if group.is_leader(req.member_id):
                self._store_assignment(group, req)
        else:  # Stable: the member lost its reply, or joined as an unchanged follower
            self._synced(group, req.member_id)
            respond({"error_code": ErrorCode.none, "protocol_type": group.protocol_type,
                     "protocol_name": group.protocol_name,
                     "assignment": group.member(req.member_id).assignment})

    @staticmethod
    def _sync_error(group: ClassicGroup, req: SyncRequest) -> ErrorCode | None:
        if group.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except KafkaError as e:
            return e.code
        if req.generation != group.generation:
            return ErrorCode.illegal_generation
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.is_in(COMPLETING, STABLE) or not group.pending_sync:
            self.timer.cancel(sync_key(group.group_id))

    def _store_assignment(self, group: ClassicGroup, req: SyncRequest) -> None:
        assignment = dict(req.assignments)
        missing = [m for m in group.members if m not in assignment]
        for member_id in missing:
            assignment[member_id] = b""
        if missing:
            log.warning("Group %s generation %d: leader sent no assignment for %s",
                        group.group_id, group.generation, missing)
        try:
            self.store.store_group(group, assignment)
        except KafkaError as e:
            if group.is_in(COMPLETING) and req.generation == group.generation:
                self._reset_assignments(group, e.code)
                self._rebalance_or_complete_join(group, f"error {e.code.name} storing the "
                                                        "assignment")
            return
        if group.is_in(COMPLETING) and req.generation == group.generation:
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate(group, ErrorCode.none)
            group.transition_to(STABLE, self.clock.now_ms())
            log.info("Group %s generation %d is stable", group.group_id, group.generation)

    # ---- Heartbeat --------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(DEAD):
            return ErrorCode.coordinator_not_available
        try:
            group.validate_member(member_id, instance_id)
        except KafkaError as e:
            return e.code
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_empty():
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, group.member(member_id))
        if group.is_in(PREPARING):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # ---- LeaveGroup -------------------------------------------------------------------------
    def leave(self, group_id: str, members: list[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per (member id, instance id) in `members`)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        if group.is_in(DEAD):
            return ErrorCode.coordinator_not_available, []
        errors = [self._leave_one(group, member_id, instance_id)
                  for member_id, instance_id in members]
        if any(e == ErrorCode.none for e in errors):
            if group.is_in(STABLE, COMPLETING):
                self._rebalance_or_complete_join(group, "members left the group")
            elif group.is_in(PREPARING):
                self._maybe_complete_join(group)
        return ErrorCode.none, errors

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None
                   ) -> ErrorCode:
        if not member_id:  # the admin client removing a static member by instance id
            static_id = group.static_member_id(instance_id) if instance_id is not None else None
            if static_id is None:
                return ErrorCode.unknown_member_id
            self._remove_member(group, static_id)
            return ErrorCode.none
        if member_id in group.pending_join:
            group.remove(member_id)
            self.timer.cancel(heartbeat_key(group.group_id, member_id))
            return ErrorCode.none
        try:
            group.validate_member(member_id, instance_id)
        except KafkaError as e:
            return e.code
        self._remove_member(group, member_id)
        return ErrorCode.none

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        log.info("Group %s: member %s leaves", group.group_id, member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        self._drop_parked(group, member_id)
        group.remove(member_id)

    # ---- lifecycle --------------------------------------------------------------------------
    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An offset commit of a member keeps its session alive (Stable or preparing)."""
        member = group.members.get(member_id)
        if member is not None and group.is_in(STABLE, PREPARING):
            self._schedule_heartbeat(group, member)

    def on_loaded(self, group: ClassicGroup) -> None:
        """A group read back from the log: its members' sessions start now."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    def unload(self, group: ClassicGroup) -> None:
        """The coordinator stops: the group is Dead and parked requests are told to look for
        the coordinator again."""
        group.transition_to(DEAD, self.clock.now_ms())
        for member in list(group.members.values()):
            group.complete_join(member, join_error(ErrorCode.not_coordinator, member.member_id))
            group.complete_sync(member, sync_error(ErrorCode.not_coordinator))


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
