"""CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords: the admin calls on topics.

The first three change the cluster metadata: they go to the active controller as they came
(Kafka's forwarding), which validates them topic by topic and answers with Kafka's codes and
messages once the change is committed; this broker then waits until it has applied the change
itself before answering, so the topic can be used here at once. DeleteRecords moves a log start
offset on the partition's leader.
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.errors import error_code_for
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.metadata import MetadataImage
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey


def _succeeded(results: Any) -> list[Any]:
    return [r for r in results if r.error_code == ErrorCode.none]


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    response = await ctx.services.topics.forward(request)
    if not request.validate_only:
        created = {r.name for r in _succeeded(response.topics)}
        await ctx.services.topics.applied(
            lambda image: all(image.topic(name) is not None for name in created))
    return response


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    response = await ctx.services.topics.forward(request)
    gone = [(r.name, getattr(r, "topic_id", None)) for r in _succeeded(response.responses)]

    def deleted(image: MetadataImage) -> bool:
        return all((name is None or image.topic(name) is None) and
                   (topic_id is None or topic_id not in image.topics) for name, topic_id in gone)

    await ctx.services.topics.applied(deleted)
    ctx.services.replicas.wake_all()
    return response


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    response = await ctx.services.topics.forward(request)
    if not request.validate_only:
        done = {r.name for r in _succeeded(response.results)}
        wanted = {t.name: t.count for t in request.topics if t.name in done}

        def grown(image: MetadataImage) -> bool:
            return all((topic := image.topic(name)) is not None and
                       len(topic.partitions) >= count for name, count in wanted.items())

        await ctx.services.topics.applied(grown)
    return response


@handles(ApiKey.DELETE_RECORDS)
async def handle_delete_records(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1,
                     "error_code": ErrorCode.none}
            try:
                entry["low_watermark"] = services.topics.delete_records(
                    t.name, p.partition_index, p.offset, services.replicas.log)
            except Exception as exc:
                entry["error_code"] = error_code_for(exc)
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
