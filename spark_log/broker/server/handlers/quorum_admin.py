"""ElectLeaders and DescribeQuorum on a broker: both go to the active controller as they came
(Kafka's forwarding). ElectLeaders is answered once this broker has applied the elections the
controller committed, so a client asking here next sees the new leaders; DescribeQuorum is the
quorum leader's view, as `kafka-metadata-quorum.sh --bootstrap-server` gets it.
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.metadata import MetadataImage
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

PREFERRED = 0  # ElectionType.PREFERRED


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Any:
    response = await ctx.services.topics.forward(request)
    if getattr(request, "election_type", PREFERRED) == PREFERRED:
        elected = [(topic.topic, result.partition_id)
                   for topic in response.replica_election_results
                   for result in topic.partition_result if result.error_code == ErrorCode.none]
        if elected:  # a preferred election makes the first replica the leader
            await ctx.services.topics.applied(
                lambda image: all(_preferred_leads(image, name, p) for name, p in elected))
    return response


@handles(ApiKey.DESCRIBE_QUORUM)
async def handle_describe_quorum(ctx: RequestContext, request: Any) -> Any:
    return await ctx.services.topics.forward(request)


def _preferred_leads(image: MetadataImage, topic: str, partition: int) -> bool:
    registration = image.partition(topic, partition)
    return registration is None or registration.leader == registration.replicas[0]
