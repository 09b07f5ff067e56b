"""Metadata and DescribeCluster: brokers, topics, partitions and their leaders, from the cluster
metadata this broker applied (Kafka's KRaftMetadataCache answers).

Brokers are the live (registered, unfenced) ones with an endpoint on the clients' listener.
A partition answers its leader and leader epoch, replicas and ISR; with its leader not live it
answers LEADER_NOT_AVAILABLE and leader -1, and replicas on brokers not registered are listed
offline. While this broker's data directory is offline the partitions it hosts answer
KAFKA_STORAGE_ERROR, their replica here offline. As in KRaft the controller id is a live broker
(clients never talk to controllers). Topics are named (or, from v10, identified by id); a null
or empty list (v0: empty) means all topics. An unknown topic is auto-created when the broker
allows it (`auto.create.topics.enable`) and the request does (`allow_auto_topic_creation`, v4+;
always for older versions); the first answer already carries the new topic's partitions.
"""

from __future__ import annotations

import uuid
from typing import Any

from spark_log.broker.errors import error_code_for
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.metadata import PartitionRegistration
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.storage.data_dir.topics_file import TopicInfo

ZERO_UUID = uuid.UUID(int=0)


def broker_entries(services: Services) -> list[dict[str, Any]]:
    entries = []
    for broker in services.cluster.live_brokers():
        endpoint = broker.endpoint(services.listener_name)
        if endpoint is not None:
            entries.append({"node_id": broker.id, "broker_id": broker.id, "host": endpoint.host,
                            "port": endpoint.port, "rack": broker.rack or None,
                            "is_fenced": False})
    return entries


def controller_id(services: Services) -> int:
    """KRaft answers a live broker (clients never talk to controllers): this one if live."""
    live = [b.id for b in services.cluster.live_brokers()]
    return services.node_id if services.node_id in live or not live else live[0]


def partition_entry(services: Services, index: int, state: PartitionRegistration
                    ) -> dict[str, Any]:
    image = services.cluster.image
    live = {b.id for b in services.cluster.live_brokers()}
    offline = [r for r in state.replicas if r not in image.brokers]
    error, leader = ErrorCode.none, state.leader
    if leader not in live:
        error, leader = ErrorCode.leader_not_available, -1
    if services.node_id in state.replicas and services.logs.failure.failed:
        error = ErrorCode.kafka_storage_error  # the replica here is in an offline directory
        offline = sorted({*offline, services.node_id})
        if leader == services.node_id:
            leader = -1
    return {"error_code": error, "partition_index": index, "leader_id": leader,
            "leader_epoch": state.leader_epoch, "replica_nodes": list(state.replicas),
            "isr_nodes": list(state.isr), "offline_replicas": offline}


def topic_entry(services: Services, info: TopicInfo) -> dict[str, Any]:
    image_topic = services.cluster.image.topic(info.name)
    partitions = image_topic.partitions if image_topic is not None else {}
    return {
        "error_code": ErrorCode.none, "name": info.name, "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [partition_entry(services, p, partitions[p]) for p in sorted(partitions)],
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
        topics = [await _lookup(services, t, allow_create) for t in requested]
    return {
        "throttle_time": 0, "brokers": broker_entries(services), "cluster_id": services.cluster_id,
        "controller_id": controller_id(services), "topics": topics, "error_code": ErrorCode.none,
    }


async def _lookup(services: Services, requested: Any, allow_create: bool) -> dict[str, Any]:
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
            info = await services.topics.auto_create(name)
        except Exception as exc:  # an invalid name answers INVALID_TOPIC_EXCEPTION for it alone
            return _error_entry(error_code_for(exc), name, None)
    return topic_entry(services, info)


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "endpoint_type": getattr(request, "endpoint_type", 1), "cluster_id": services.cluster_id,
        "controller_id": controller_id(services), "brokers": broker_entries(services),
    }
