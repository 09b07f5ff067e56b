"""Produce: append each partition's record batches and answer with their base offsets.

Batches stay bytes end to end: storage validates headers and CRCs and patches offsets in place.
An error in one partition (unknown partition, corrupt batch, too large) is that partition's
answer alone. acks=0 gets no response, so — as Kafka does — a failed acks=0 produce closes the
connection, the only way the producer can notice.
"""

from __future__ import annotations

from typing import Any

from spark_log.protocol import ErrorCode, ProtocolError
from spark_log.protocol.api_keys import ApiKey

from ..errors import KafkaError, error_code_for, error_message_for
from . import handles

VALID_ACKS = (-1, 0, 1)


@handles(ApiKey.PRODUCE)
async def handle_produce(ctx: Any, request: Any) -> dict[str, Any] | None:
    broker = ctx.broker
    acks = request.acks
    responses = []
    failed: list[str] = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            answer = _append(broker, topic.name, data.index, data.records, acks)
            if answer["error_code"] != ErrorCode.none:
                failed.append(f"{topic.name}-{data.index}: {answer['error_message']}")
            partitions.append(answer)
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        if failed:
            raise ProtocolError(f"acks=0 produce failed ({'; '.join(failed)})")
        return None
    return {"responses": responses, "throttle_time": 0}


def _append(broker: Any, topic: str, partition: int, records: Any, acks: int) -> dict[str, Any]:
    try:
        if acks not in VALID_ACKS:
            raise KafkaError(ErrorCode.invalid_required_acks,
                             f"acks must be -1, 0 or 1, not {acks}")
        info = broker.topics.metadata.get(topic)
        if info is not None and info.internal:
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Cannot append to internal topic {topic}")
        if records is None:
            raise KafkaError(ErrorCode.corrupt_message, "the partition's records are null")
        result = broker.replicas.append(topic, partition, records)
    except Exception as exc:
        broker.metrics.failed_produce.labels(topic).inc()
        return {"index": partition, "error_code": error_code_for(exc), "base_offset": -1,
                "log_append_time": -1, "log_start_offset": -1, "record_errors": [],
                "error_message": error_message_for(exc)}
    broker.metrics.record_produce(topic, result.size_bytes, result.record_count)
    return {"index": partition, "error_code": ErrorCode.none, "base_offset": result.first_offset,
            "log_append_time": result.log_append_time,
            "log_start_offset": result.log_start_offset, "record_errors": [],
            "error_message": None}
