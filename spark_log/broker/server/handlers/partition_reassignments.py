"""AlterPartitionReassignments and ListPartitionReassignments on a broker: both go to the
active controller as they came (Kafka's forwarding). An alteration is answered once this broker
has applied what the controller committed, so that a client asking here next (a Metadata for
the replicas, a `--verify`) sees the moves begun, completed or cancelled.
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.metadata import MetadataImage
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    response = await ctx.services.topics.forward(request)
    ok = {(topic.name, p.partition_index) for topic in response.responses
          for p in topic.partitions if p.error_code == ErrorCode.none}
    wanted = {(topic.name, p.partition_index): p.replicas for topic in request.topics
              for p in topic.partitions if (topic.name, p.partition_index) in ok}
    if wanted:
        await ctx.services.topics.applied(
            lambda image: all(_applied(image, topic, partition, replicas)
                              for (topic, partition), replicas in wanted.items()))
    return response


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    return await ctx.services.topics.forward(request)


def _applied(image: MetadataImage, topic: str, partition: int,
             replicas: tuple[int, ...] | None) -> bool:
    """A move shows once the replicas begin with its targets; a cancel once none is moving."""
    registration = image.partition(topic, partition)
    if registration is None:
        return True
    if replicas is None:
        return not registration.is_reassigning
    return registration.replicas[:len(replicas)] == tuple(replicas)
