"""FindCoordinator and the consumer group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups and DeleteGroups.

Each handler turns its request version into a call on `services.groups` (the group coordinator)
and its answer back into a version-independent response. FindCoordinator names, for a group,
the leader of its `__consumer_offsets` partition, for a transactional id the leader of its
`__transaction_state` partition. Version differences handled here:
FindCoordinator batches keys from v4; JoinGroup v0 has no rebalance timeout (the session timeout
is used) and before v7 the protocol name is not nullable; LeaveGroup carries one member before
v3 and reports that member's error at the top level; DescribeGroups lists authorized
operations on request (v3+).
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.group.group_requests import JoinRequest, SyncRequest
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.broker.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import ms

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NULLABLE_PROTOCOL_NAME_FROM = 7
BATCHED_LEAVE_FROM = 3

# ACL operations a group supports (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as
# Kafka's 32-bit field; without an authorizer every one is allowed.
GROUP_AUTHORIZED_OPERATIONS = sum(1 << code for code in (3, 6, 8, 10, 11))

# Kafka's default exception messages for the errors FindCoordinator can answer.
_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.invalid_request: "Unknown coordinator type",
}


# ---- FindCoordinator --------------------------------------------------------------------------
@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> dict[str, Any]:
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if ctx.version >= 4:
        return {"throttle_time": 0, "coordinators": [
            await _coordinator(ctx, key, key_type, with_message=False)
            for key in request.coordinator_keys]}
    return {"throttle_time": 0,
            **await _coordinator(ctx, request.key, key_type, with_message=True)}


async def _coordinator(ctx: RequestContext, key: str, key_type: int, with_message: bool
                       ) -> dict[str, Any]:
    services = ctx.services
    node: tuple[int, str, int] | None = None
    if key_type == GROUP_KEY_TYPE:
        error, partition = await services.groups.find_coordinator(key)
        if error == ErrorCode.none:
            node = _leader(services, OFFSETS_TOPIC, partition)
            error = ErrorCode.none if node is not None else ErrorCode.coordinator_not_available
    elif key_type == TRANSACTION_KEY_TYPE:
        error, partition = await services.transactions.find_coordinator(key)
        if error == ErrorCode.none:
            node = _leader(services, TRANSACTION_STATE_TOPIC, partition)
            error = ErrorCode.none if node is not None else ErrorCode.coordinator_not_available
    else:
        error = ErrorCode.invalid_request
    node_id, host, port = node if error == ErrorCode.none and node is not None else (-1, "", -1)
    return {"key": key, "error_code": error,
            "error_message": _MESSAGES.get(error, error.name.upper()) if with_message else None,
            "node_id": node_id, "host": host, "port": port}


def _leader(services: Services, topic: str, partition: int) -> tuple[int, str, int] | None:
    """The live leader of a coordinator's partition, with its endpoint on the clients'
    listener; None while the partition has none (COORDINATOR_NOT_AVAILABLE, and the client
    asks again)."""
    state = services.cluster.partition(topic, partition)
    if state is None or state.leader < 0:
        return None
    endpoint = services.cluster.endpoint(state.leader, services.listener_name)
    return None if endpoint is None else (state.leader, *endpoint)


# ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------
@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    session_timeout = ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=session_timeout if rebalance is None else ms(rebalance),
        client_id=ctx.client_id or "", client_host=f"/{ctx.peer.host}",
        api_version=ctx.version, reason=getattr(request, "reason", None))
    response = await ctx.services.groups.join_group(join)
    if ctx.version < NULLABLE_PROTOCOL_NAME_FROM and response["protocol_name"] is None:
        response = {**response, "protocol_name": ""}
    return {"throttle_time": 0, **response}


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    sync = SyncRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        generation=request.generation_id,
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments})
    return {"throttle_time": 0, **await ctx.services.groups.sync_group(sync)}


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    error = ctx.services.groups.heartbeat(request.group_id, request.member_id,
                                        getattr(request, "group_instance_id", None),
                                        request.generation_id)
    return {"throttle_time": 0, "error_code": error}


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.version >= BATCHED_LEAVE_FROM:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error, errors = ctx.services.groups.leave_group(request.group_id, members)
    if ctx.version < BATCHED_LEAVE_FROM:
        if error == ErrorCode.none and errors:
            error = errors[0]
        return {"throttle_time": 0, "error_code": error, "members": []}
    return {"throttle_time": 0, "error_code": error, "members": [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
        for (member_id, instance_id), code in zip(members, errors, strict=False)]}


# ---- ListGroups / DescribeGroups / DeleteGroups -----------------------------------------------
@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    error, groups = ctx.services.groups.list_groups(getattr(request, "states_filter", ()),
                                                  getattr(request, "types_filter", ()))
    return {"throttle_time": 0, "error_code": error, "groups": groups}


@handles(ApiKey.DESCRIBE_GROUPS)
async def handle_describe_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    groups = ctx.services.groups.describe_groups(request.groups, ctx.version)
    if getattr(request, "include_authorized_operations", False):
        for group in groups:
            if group["error_code"] == ErrorCode.none:
                group["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS
    return {"throttle_time": 0, "groups": groups}


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    names = list(request.groups_names)
    errors = ctx.services.groups.delete_groups(names)
    return {"throttle_time": 0, "results": [
        {"group_id": name, "error_code": code} for name, code in zip(names, errors, strict=True)]}
