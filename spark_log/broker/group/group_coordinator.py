"""The group coordinator: the public face of consumer groups on this broker.

One object per broker answers every group API — membership (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), group administration (ListGroups, DescribeGroups,
DeleteGroups), offsets (OffsetCommit, OffsetFetch, OffsetDelete) and, for the transaction
coordinator, transactional offset commits and their completion. Handlers translate wire versions
to these calls; this module applies Kafka's request-level rules (coordinator active, group id
valid, session timeout in range, partition loaded) and then delegates: the rebalance protocol to
`group_membership`, memory and `__consumer_offsets` to `group_coordinator_state`, offset rules to
`group_coordinator_offsets`.

Timeouts run on the broker's injectable clock through one timer task; at start every existing
`__consumer_offsets` partition is replayed in the background and requests for a group whose
partition is not loaded yet get COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from spark_log.broker.coordinator.coordinator_partitions import CoordinatorPartitions
from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group import ClassicGroup, GroupState, Responder
from spark_log.broker.group.group_coordinator_offsets import OffsetOperations
from spark_log.broker.group.group_coordinator_state import CoordinatorState
from spark_log.broker.group.group_membership import GroupMembership
from spark_log.broker.group.group_requests import (
    GroupDescription,
    GroupSettings,
    JoinRequest,
    MemberDescription,
    SyncRequest,
    join_error,
    sync_error,
)
from spark_log.broker.group.group_timer import CoordinatorTimer
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.protocol import ErrorCode

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.coordinator.collaborators import InternalTopics, PartitionLogs
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

MAX_TIMER_SLEEP_S = 0.25
CLASSIC_GROUP_TYPE = "classic"


class GroupCoordinator(OffsetOperations):
    """The coordinator of the groups whose `__consumer_offsets` partitions this broker leads.

    Invariants: while active, every partition the metadata says this broker leads is either
    loaded (its groups are in memory) or in `state.loading`; the groups of any other partition
    are not in memory (a partition whose leadership moved away is unloaded: parked requests
    get NOT_COORDINATOR and its new leader loads it). Event-loop only."""

    def __init__(self, config: BrokerConfig, clock: Clock, topics: InternalTopics,
                 logs: PartitionLogs) -> None:
        self.config = config
        self.clock = clock
        self.state = CoordinatorState(config, clock, topics, logs)
        self._wakeup: asyncio.Future[None] | None = None
        self.timer = CoordinatorTimer(clock, on_change=self._wake)
        self.settings = GroupSettings.from_config(config)
        self.membership = GroupMembership(self.state.groups, self.state, self.timer, self.clock,
                                          self.settings)
        self._active = False
        self.partitions = CoordinatorPartitions(self._load, self._unload, self.state.loading,
                                                self.state.loaded)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.state.groups

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start serving; the partitions this broker leads load in the background."""
        self._active = True
        self.partitions.start()
        self._tasks.append(asyncio.create_task(self._drive_timers()))

    async def stop(self) -> None:
        """Stop serving: parked JoinGroup/SyncGroup requests get NOT_COORDINATOR."""
        self._active = False
        await self.partitions.stop()
        for group in list(self.groups.values()):
            if not group.is_in(GroupState.DEAD):
                self.membership.unload(group)
        self.groups.clear()
        self.timer.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # ---- leadership of __consumer_offsets partitions (from the metadata) ------------------
    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `partition` of `__consumer_offsets`: load its groups."""
        self.partitions.elected(partition, leader_epoch)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads `partition` now (or nobody does): unload its groups."""
        if self.partitions.resigned(partition):
            log.info("%s-%d is led by another broker now: its groups are unloaded",
                     OFFSETS_TOPIC, partition)

    def _unload(self, partition: int) -> None:
        def owned(group_id: str) -> bool:
            return self.state.partition_of(group_id) == partition

        for group in [g for g in self.groups.values() if owned(g.group_id)]:
            if not group.is_in(GroupState.DEAD):
                self.membership.unload(group)
            del self.groups[group.group_id]
        self.state.offsets.forget(owned)

    async def _load(self, partition: int) -> bool:
        started = time.monotonic()
        try:
            await self.state.load(partition)
        except NotLeaderError:  # the metadata moved on while this load was queued
            log.info("%s-%d is led by another broker: its groups are not loaded here",
                     OFFSETS_TOPIC, partition)
            return False
        except Exception:
            log.exception("Loading %s-%d failed", OFFSETS_TOPIC, partition)
        for group in self.groups.values():
            if self.state.partition_of(group.group_id) == partition:
                self.membership.on_loaded(group)
        log.info("Finished loading offsets and group metadata from %s-%d in %d ms",
                 OFFSETS_TOPIC, partition, (time.monotonic() - started) * 1000)
        return True

    async def _drive_timers(self) -> None:
        """Run due timeouts; sleep until the next deadline (at most MAX_TIMER_SLEEP_S, so a
        clock moved by hand is noticed) or until a new timeout is scheduled."""
        loop = asyncio.get_running_loop()
        while True:
            self.timer.run_due()
            deadline = self.timer.next_deadline()
            wait = MAX_TIMER_SLEEP_S if deadline is None else \
                min(MAX_TIMER_SLEEP_S, max(0, deadline - self.clock.monotonic_ms()) / 1000)
            self._wakeup = wakeup = loop.create_future()
            handle = loop.call_later(wait, self._wake)
            try:
                await wakeup
            finally:
                handle.cancel()
                self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def loaded(self) -> bool:
        return not self.state.loading

    # ---- request checks ---------------------------------------------------------------------
    def ensure_ready(self, group_id: str) -> None:
        """Raise the error Kafka answers when this coordinator cannot serve `group_id` now."""
        if not self._active:
            raise KafkaError(ErrorCode.coordinator_not_available)
        self.state.ensure_topic()
        partition = self.state.partition_of(group_id)
        if partition in self.state.loading:
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        if partition not in self.state.loaded:
            raise KafkaError(ErrorCode.not_coordinator)

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id` (for AddOffsetsToTxn)."""
        return self.state.partition_of(group_id)

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, int]:
        """FindCoordinator for a group: (error, its `__consumer_offsets` partition), the topic
        created on first use. When this broker leads the partition, the answer waits (bounded)
        for it to load, so the client's next request finds it ready."""
        try:
            await self.state.create_topic()
        except Exception as e:
            log.error("Cannot create %s: %s", OFFSETS_TOPIC, e)
            return ErrorCode.coordinator_not_available, -1
        if not self._active:
            return ErrorCode.coordinator_not_available, -1
        partition = self.state.partition_of(group_id)
        await self.partitions.until_loaded(partition)
        return ErrorCode.none, partition

    # ---- membership -------------------------------------------------------------------------
    async def join_group(self, req: JoinRequest) -> dict[str, Any]:
        try:
            if not req.group_id:
                raise KafkaError(ErrorCode.invalid_group_id)
            if not self.settings.min_session_timeout_ms <= req.session_timeout_ms <= \
                    self.settings.max_session_timeout_ms:
                raise KafkaError(ErrorCode.invalid_session_timeout)
            self.ensure_ready(req.group_id)
        except KafkaError as e:
            return join_error(e.code, req.member_id)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.membership.join(req, _resolver(future))
        return await future

    async def sync_group(self, req: SyncRequest) -> dict[str, Any]:
        try:
            self._ready_for_group(req.group_id)
        except KafkaError as e:
            return sync_error(e.code)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.membership.sync(req, _resolver(future))
        return await future

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        try:
            self._ready_for_group(group_id)
        except KafkaError as e:
            return e.code
        return self.membership.heartbeat(group_id, member_id, instance_id, generation)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, per-member errors) for LeaveGroup's (member id, instance id) pairs."""
        try:
            self._ready_for_group(group_id)
        except KafkaError as e:
            return e.code, []
        return self.membership.leave(group_id, members)

    def _ready_for_group(self, group_id: str) -> None:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        self.ensure_ready(group_id)

    # ---- groups -----------------------------------------------------------------------------
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> tuple[ErrorCode, list[dict[str, str]]]:
        if not self._active:
            return ErrorCode.coordinator_not_available, []
        if self.state.loading:
            return ErrorCode.coordinator_load_in_progress, []
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return ErrorCode.none, []
        return ErrorCode.none, [
            {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
             "group_state": g.state.value, "group_type": CLASSIC_GROUP_TYPE}
            for g in self.groups.values()
            if not wanted_states or g.state.value.lower() in wanted_states]

    def describe_groups(self, group_ids: Iterable[str], api_version: int) -> list[dict[str, Any]]:
        return [self._describe(group_id, api_version) for group_id in group_ids]

    def _describe(self, group_id: str, api_version: int) -> dict[str, Any]:
        described: dict[str, Any] = {"group_id": group_id, "error_code": ErrorCode.none,
                                     "error_message": None, "group_state": "",
                                     "protocol_type": "", "protocol_data": "", "members": []}
        try:
            self.ensure_ready(group_id)
        except KafkaError as e:
            return {**described, "error_code": e.code}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            if api_version >= 6:
                return {**described, "error_code": ErrorCode.group_id_not_found,
                        "error_message": f"Group {group_id} not found."}
            return {**described, "group_state": GroupState.DEAD.value}
        stable = group.is_in(GroupState.STABLE)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment} for m in group.members.values()]
        return {**described, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "",
                "members": members}

    def delete_groups(self, group_ids: Iterable[str]) -> list[ErrorCode]:
        return [self._delete_group(group_id) for group_id in group_ids]

    def _delete_group(self, group_id: str) -> ErrorCode:
        try:
            self.ensure_ready(group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                raise KafkaError(ErrorCode.group_id_not_found)
            if not group.is_empty():
                raise KafkaError(ErrorCode.non_empty_group)
            self.state.delete_group(group)
        except KafkaError as e:
            return e.code
        log.info("Group %s deleted", group_id)
        return ErrorCode.none

    # ---- queries (CLI, metrics) -------------------------------------------------------------
    def group_ids(self) -> list[str]:
        return sorted(self.groups)

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """State, protocol, members and committed offsets of a group; None if unknown."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        members = tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                          m.client_host, m.metadata(group.protocol_name),
                                          m.assignment) for m in group.members.values())
        return GroupDescription(group_id, group.state.value, group.protocol_type or "",
                                group.protocol_name, group.generation, group.leader_id, members,
                                self.state.offsets.group_offsets(group_id))


def _resolver(future: asyncio.Future[dict[str, Any]]) -> Responder:
    def resolve(response: dict[str, Any]) -> None:
        if not future.done():
            future.set_result(response)

    return resolve
