"""Metadata and DescribeCluster: brokers, the controller, topics, partitions and their leaders.

Topics are named (or, from v10, identified by id); a null or empty list (v0: empty) means all
topics. An unknown topic is auto-created when the broker allows it (`auto.create.topics.enable`)
and the request does (`allow_auto_topic_creation`, v4+; always for older versions); creation is
synchronous here, so the first answer already carries the new topic's partitions. While the
data directory is offline every partition answers KAFKA_STORAGE_ERROR, without a leader, its
replica listed offline.
"""

from __future__ import annotations

import uuid
from typing import Any

from spark_log.broker.errors import error_code_for
from spark_log.broker.replication.leader_epochs import LEADER_EPOCH
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.storage.data_dir.topics_file import TopicInfo

ZERO_UUID = uuid.UUID(int=0)


def broker_entries(services: Services) -> list[dict[str, Any]]:
    return [{"node_id": services.node_id, "broker_id": services.node_id,
             "host": services.advertised_host, "port": services.advertised_port, "rack": None,
             "is_fenced": False}]


def topic_entry(services: Services, info: TopicInfo) -> dict[str, Any]:
    node = services.node_id
    if services.logs.failure.failed:  # the only replica is in an offline log directory
        partition = {"error_code": ErrorCode.kafka_storage_error, "leader_id": -1,
                     "isr_nodes": [], "offline_replicas": [node]}
    else:
        partition = {"error_code": ErrorCode.none, "leader_id": node, "isr_nodes": [node],
                     "offline_replicas": []}
    return {
        "error_code": ErrorCode.none, "name": info.name, "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [{**partition, "partition_index": p, "leader_epoch": LEADER_EPOCH,
                        "replica_nodes": [node]} for p in range(info.partitions)],
    }


def _error_entry(code: ErrorCode, name: str | None, topic_id: uuid.UUID | None) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id or ZERO_UUID,
            "is_internal": False, "partitions": []}


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    requested = request.topics
    if requested is None or (ctx.version == 0 and not requested):
        topics = [topic_entry(services, info) for info in services.topics.metadata.all()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True) and \
            services.config.get("auto.create.topics.enable")
        topics = [_lookup(services, t, allow_create) for t in requested]
    return {
        "throttle_time": 0, "brokers": broker_entries(services), "cluster_id": services.cluster_id,
        "controller_id": services.node_id, "topics": topics, "error_code": ErrorCode.none,
    }


def _lookup(services: Services, requested: Any, allow_create: bool) -> dict[str, Any]:
    name = getattr(requested, "name", None)
    topic_id = getattr(requested, "topic_id", None)
    metadata = services.topics.metadata
    if name is None:
        info = metadata.by_id(topic_id) if topic_id and topic_id != ZERO_UUID else None
        if info is None:
            return _error_entry(ErrorCode.unknown_topic_id, None, topic_id)
        return topic_entry(services, info)
    info = metadata.get(name)
    if info is None:
        if not allow_create:
            return _error_entry(ErrorCode.unknown_topic_or_partition, name, None)
        try:
            info = services.topics.auto_create(name)
        except Exception as exc:  # an invalid name answers INVALID_TOPIC_EXCEPTION for it alone
            return _error_entry(error_code_for(exc), name, None)
    return topic_entry(services, info)


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "endpoint_type": getattr(request, "endpoint_type", 1), "cluster_id": services.cluster_id,
        "controller_id": services.node_id, "brokers": broker_entries(services),
    }
