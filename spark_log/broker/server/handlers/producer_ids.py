"""InitProducerId for idempotent producers (no transactional id): a fresh producer id at epoch 0.

As in Kafka, a producer without a transactional id gets a new id every time it asks — also on
the KIP-360 path where it offers its current id and epoch after an error — so its sequence
numbers start over without ambiguity. Transactional ids are the transaction coordinator's
(`transactions.init_transactional_producer_id`).
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.errors import KafkaError
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.handlers.transactions import init_transactional_producer_id
from spark_log.broker.server.request_context import RequestContext
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    if request.transactional_id is not None:
        return await init_transactional_producer_id(ctx, request)
    try:
        await services.producer_ids.ready()
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "producer_id": services.producer_ids.next_id(), "producer_epoch": 0}
