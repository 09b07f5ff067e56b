"""Producer-id blocks as the active controller hands them out (Kafka's ProducerIdControlManager
and QuorumController.allocateProducerIds): AllocateProducerIds gives a broker the next block of
1000 ids and writes a ProducerIdsRecord whose `next_producer_id` is the first id after it.

Because the next block always starts where the image's last ProducerIdsRecord says, and the
image refuses a record that does not move it up, no id is handed out twice, across controller
fail-overs too (the record is committed before the broker is answered).
"""

from __future__ import annotations

from typing import Any

from spark_log.metadata import MetadataImage
from spark_log.metadata.records import ProducerIdsRecord
from spark_log.protocol import ErrorCode

from .controller_result import ControllerResult, response_for

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "allocate_producer_ids"]

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_LONG_MAX = 2**63 - 1


def allocate_producer_ids(image: MetadataImage, request: Any) -> ControllerResult[Any]:
    """The next block for the broker, or STALE_BROKER_EPOCH when the broker is not registered
    with that epoch; UNKNOWN_SERVER_ERROR once the ids are exhausted."""
    broker = image.broker(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        return _failure(request, ErrorCode.stale_broker_epoch)
    first = max(image.next_producer_id, 0)
    if first > _LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
        return _failure(request, ErrorCode.unknown_server_error)
    record = ProducerIdsRecord(broker_id=request.broker_id, broker_epoch=request.broker_epoch,
                               next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
    return ControllerResult.of([record], response_for(request, {
        "error_code": ErrorCode.none, "producer_id_start": first,
        "producer_id_len": PRODUCER_ID_BLOCK_SIZE}))


def _failure(request: Any, code: ErrorCode) -> ControllerResult[Any]:
    return ControllerResult.of((), response_for(request, {
        "error_code": code, "producer_id_start": 0, "producer_id_len": 0}))
