"""OffsetCommit, OffsetFetch and OffsetDelete: committed consumer offsets, kept by the group
coordinator (`services.groups`).

As in Kafka, the broker checks topics before the coordinator sees them: a topic or partition
that does not exist fails with UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for a topic named by
an id, OffsetCommit/OffsetFetch v10), and a group-level error from the coordinator (unknown
member, stale generation, loading ...) is given to every remaining partition. OffsetFetch
serves one group per request before v8 (top-level error from v2; v1 puts it on each partition)
and a batch of groups from v8; a null topic list asks for every committed offset of the group.
"""

from __future__ import annotations

import uuid
from typing import Any

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group_requests import FetchedOffset, PartitionCommit
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import ms

BATCHED_FETCH_FROM = 8
TOP_LEVEL_FETCH_ERROR_FROM = 2
ZERO_UUID = uuid.UUID(int=0)


def _resolve_topic(services: Services, topic: Any) -> tuple[str | None, uuid.UUID, ErrorCode]:
    """(name, id, error) of a request's topic entry, named by `name` or by `topic_id`."""
    metadata = services.topics.metadata
    name = getattr(topic, "name", None)
    if name is None:
        topic_id = getattr(topic, "topic_id", None) or ZERO_UUID
        info = metadata.by_id(topic_id) if topic_id != ZERO_UUID else None
        if info is None:
            return None, topic_id, ErrorCode.unknown_topic_id
        return info.name, topic_id, ErrorCode.none
    info = metadata.get(name)
    if info is None:
        return name, ZERO_UUID, ErrorCode.unknown_topic_or_partition
    return name, info.topic_id, ErrorCode.none


def _partition_count(services: Services, name: str) -> int:
    info = services.topics.metadata.get(name)
    return info.partitions if info else 0


# ---- OffsetCommit -----------------------------------------------------------------------------
@handles(ApiKey.OFFSET_COMMIT)
async def handle_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    answers: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    pending: list[tuple[dict[str, Any], PartitionCommit]] = []
    for topic in request.topics:
        name, topic_id, error = _resolve_topic(services, topic)
        entries: list[dict[str, Any]] = []
        answers.append(({"name": name or "", "topic_id": topic_id}, entries))
        count = _partition_count(services, name) if error == ErrorCode.none else 0
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": error}
            entries.append(entry)
            if error == ErrorCode.none and not 0 <= p.partition_index < count:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif error == ErrorCode.none:
                pending.append((entry, PartitionCommit(
                    name or "", p.partition_index, p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1), p.committed_metadata)))
    if pending:
        _commit(ctx, request, pending)
    return {"throttle_time": 0, "topics": [
        {**topic, "partitions": entries} for topic, entries in answers]}


def _commit(ctx: RequestContext, request: Any, pending: list[tuple[dict[str, Any], PartitionCommit]]
            ) -> None:
    retention = getattr(request, "retention_time", None)
    try:
        errors = ctx.services.groups.commit_offsets(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch, [c for _, c in pending],
            retention_ms=-1 if retention is None else ms(retention), api_version=ctx.version)
    except KafkaError as e:
        errors = [e.code] * len(pending)
    for (entry, _), code in zip(pending, errors, strict=True):
        entry["error_code"] = code


# ---- OffsetFetch ------------------------------------------------------------------------------
@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    stable = getattr(request, "require_stable", False)
    if ctx.version >= BATCHED_FETCH_FROM:
        return {"throttle_time": 0, "groups": [
            _fetch_group(ctx, g.group_id, g.topics, stable) for g in request.groups]}
    group = _fetch_group(ctx, request.group_id, request.topics, stable)
    if ctx.version < TOP_LEVEL_FETCH_ERROR_FROM and group["error_code"] != ErrorCode.none:
        for topic in group["topics"]:
            for partition in topic["partitions"]:
                partition["error_code"] = group["error_code"]
    return {"throttle_time": 0, "topics": group["topics"], "error_code": group["error_code"]}


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool
                 ) -> dict[str, Any]:
    services = ctx.services
    wanted: list[tuple[str, int]] | None = None
    unknown: list[dict[str, Any]] = []
    if topics is not None:
        wanted = []
        for topic in topics:
            name, topic_id, error = _resolve_topic(services, topic)
            if name is None:
                unknown.append(_fetched_topic(name, topic_id, [
                    FetchedOffset("", p, -1, -1, "", error) for p in topic.partition_indexes]))
            else:
                wanted += [(name, p) for p in topic.partition_indexes]
    error = ErrorCode.none
    try:
        fetched = services.groups.fetch_offsets(group_id, wanted, require_stable)
    except KafkaError as e:
        error = e.code
        fetched = [FetchedOffset(t, p, -1, -1, "", e.code) for t, p in wanted or ()]
    return {"group_id": group_id, "error_code": error,
            "topics": _by_topic(services, fetched) + unknown}


def _by_topic(services: Services, fetched: list[FetchedOffset]) -> list[dict[str, Any]]:
    grouped: dict[str, list[FetchedOffset]] = {}
    for f in fetched:
        grouped.setdefault(f.topic, []).append(f)
    metadata = services.topics.metadata
    return [_fetched_topic(name, (info.topic_id if (info := metadata.get(name)) else ZERO_UUID),
                           offsets) for name, offsets in grouped.items()]


def _fetched_topic(name: str | None, topic_id: uuid.UUID, offsets: list[FetchedOffset]
                   ) -> dict[str, Any]:
    return {"name": name or "", "topic_id": topic_id, "partitions": [
        {"partition_index": f.partition, "committed_offset": f.offset,
         "committed_leader_epoch": f.leader_epoch, "metadata": f.metadata,
         "error_code": f.error} for f in offsets]}


# ---- OffsetDelete -----------------------------------------------------------------------------
@handles(ApiKey.OFFSET_DELETE)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    answers: list[tuple[str, list[dict[str, Any]]]] = []
    pending: list[tuple[dict[str, Any], tuple[str, int]]] = []
    for topic in request.topics:
        count = _partition_count(services, topic.name)
        entries = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index,
                     "error_code": ErrorCode.unknown_topic_or_partition}
            entries.append(entry)
            if 0 <= p.partition_index < count:
                pending.append((entry, (topic.name, p.partition_index)))
        answers.append((topic.name, entries))
    try:
        errors = services.groups.delete_offsets(request.group_id, [tp for _, tp in pending])
    except KafkaError as e:  # the group's error; partitions refused before it keep theirs
        sent = {id(entry) for entry, _ in pending}
        refused = [{"name": name, "partitions": [x for x in entries if id(x) not in sent]}
                   for name, entries in answers]
        return {"throttle_time": 0, "error_code": e.code,
                "topics": [t for t in refused if t["partitions"]]}
    for (entry, _), code in zip(pending, errors, strict=True):
        entry["error_code"] = code
    return {"throttle_time": 0, "error_code": ErrorCode.none, "topics": [
        {"name": name, "partitions": entries} for name, entries in answers]}
