"""CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords: the admin calls on topics.

Each topic in a request succeeds or fails on its own, with Kafka's error code and message; a
topic named twice in one request fails with INVALID_REQUEST, as in Kafka. Manual replica
assignments are accepted only when they name this broker.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from spark_log.broker.errors import KafkaError, error_code_for, error_message_for
from spark_log.broker.server.handlers.configs import topic_config_entries
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

ZERO_UUID = uuid.UUID(int=0)


def _duplicates(names: list[str]) -> set[str]:
    return {n for n, c in Counter(names).items() if c > 1}


def _check_assignments(services: Services, assignments: Any) -> None:
    """Manual assignments (lists of broker ids per partition) may only name this broker."""
    for a in assignments or ():
        unknown = [b for b in a.broker_ids if b != services.node_id]
        if unknown:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Unknown broker(s) {unknown} in a replica assignment: only broker "
                             f"{services.node_id} exists")


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    dupes = _duplicates([t.name for t in request.topics])
    results = []
    for t in request.topics:
        result = {"name": t.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.none,
                  "error_message": None, "num_partitions": -1, "replication_factor": -1,
                  "configs": None}
        try:
            if t.name in dupes:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Create topics request from client `{ctx.client_id}` contains "
                                 f"multiple entries for the following topics: {t.name}")
            partitions, factor = t.num_partitions, t.replication_factor
            if t.assignments:
                _check_assignments(services, t.assignments)
                partitions, factor = len(t.assignments), 1
            overrides = {c.name: c.value for c in t.configs if c.value is not None}
            info = services.topics.create(t.name, partitions, factor, overrides,
                                        request.validate_only)
            result.update(topic_id=info.topic_id, num_partitions=info.partitions,
                          replication_factor=1,
                          configs=topic_config_entries(services, overrides, None))
        except Exception as exc:
            result.update(error_code=error_code_for(exc), error_message=error_message_for(exc))
        results.append(result)
    return {"throttle_time": 0, "topics": results}


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    wanted = [(getattr(t, "name", None), getattr(t, "topic_id", None))
              for t in getattr(request, "topics", ())]
    wanted += [(name, None) for name in getattr(request, "topic_names", ())]
    responses = []
    deleted_names: list[str] = []
    for name, topic_id in wanted:
        response = {"name": name, "topic_id": topic_id or ZERO_UUID,
                    "error_code": ErrorCode.none, "error_message": None}
        try:
            if name is None:
                info = services.topics.metadata.by_id(topic_id) if topic_id else None
                if info is None:
                    raise KafkaError(ErrorCode.unknown_topic_id)
                name = info.name
            deleted = services.topics.delete(name)
            deleted_names.append(name)
            response.update(name=name, topic_id=deleted.topic_id)
        except Exception as exc:
            response.update(error_code=error_code_for(exc), error_message=error_message_for(exc))
        responses.append(response)
    if deleted_names:
        services.groups.on_topics_deleted(deleted_names)  # tombstones for their committed offsets
        services.metrics.forget_topics(deleted_names)
    services.replicas.wake_all()
    return {"throttle_time": 0, "responses": responses}


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    dupes = _duplicates([t.name for t in request.topics])
    results = []
    for t in request.topics:
        result = {"name": t.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            if t.name in dupes:
                raise KafkaError(ErrorCode.invalid_request, "Duplicate topic in request.")
            _check_assignments(services, t.assignments)
            services.topics.add_partitions(t.name, t.count, request.validate_only)
        except Exception as exc:
            result.update(error_code=error_code_for(exc), error_message=error_message_for(exc))
        results.append(result)
    return {"throttle_time": 0, "results": results}


@handles(ApiKey.DELETE_RECORDS)
async def handle_delete_records(ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1,
                     "error_code": ErrorCode.none}
            try:
                entry["low_watermark"] = ctx.services.topics.delete_records(
                    t.name, p.partition_index, p.offset)
            except Exception as exc:
                entry["error_code"] = error_code_for(exc)
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
