"""Produce: append each partition's record batches and answer with their base offsets.

Batches stay bytes end to end: storage validates headers and CRCs and patches offsets in place.
An error in one partition (unknown partition, corrupt batch, too large, invalid records) is that
partition's answer alone. A batch refused for some of its records (KIP-467) is answered as
Kafka does: the error, the records' indexes and messages, the log start offset. acks=0 gets no
response, so — as Kafka does — a failed acks=0 produce closes the connection, the only way the
producer can notice. A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER with
its current leader, and the response lists where those leaders listen (KIP-951).
"""

from __future__ import annotations

import asyncio
from typing import Any

from spark_log.broker.errors import KafkaError, error_code_for, error_message_for
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.broker.server.connection import Later
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode, ProtocolError
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.produce_request import ProduceRequest
from spark_log.protocol.produce_response import (
    NodeEndpoint,
    PartitionResult,
    encode_produce_response,
)
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS
from spark_log.storage.errors import StorageError

VALID_ACKS = (-1, 0, 1)


@handles(ApiKey.PRODUCE)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> bytes | Later | None:
    services = ctx.services
    acks = request.acks
    results = []
    appended: dict[tuple[str, int], int] = {}  # where each appended partition's batches end
    for topic in request.topic_data:
        answers = [_append(services, topic.name, data.index, data.records, acks, appended)
                   for data in topic.partition_data]
        results.append((topic.name, answers))
    if acks == -1 and appended:
        timeout_s = request.timeout_ms / 1000
        if not all(services.replicas.replicated(t, p, end) for (t, p), end in appended.items()):
            # Not on every ISR member yet: answered later, while the connection goes on with
            # its next requests (their appends keep their order; the answers too).
            return Later(_answer_when_replicated(ctx, services, results, appended, timeout_s))
        results = await _until_replicated(services, results, appended, timeout_s)
    if acks == 0:
        failed = [f"{name}-{a.index}: {a.error_message}" for name, answers in results
                  for a in answers if a.error_code != ErrorCode.none]
        if failed:
            raise ProtocolError(f"acks=0 produce failed ({'; '.join(failed)})")
        return None
    return _encode(ctx, services, results)


def _encode(ctx: RequestContext, services: Services,
            results: list[tuple[str, list[PartitionResult]]]) -> bytes:
    leaders = {a.current_leader[0] for _, answers in results for a in answers
               if a.current_leader is not None and a.current_leader[0] >= 0}
    header = ctx.header
    return encode_produce_response(header.correlation_id, header.api_version, results, 0,
                                   _endpoints(services, sorted(leaders)) if leaders else ())


async def _answer_when_replicated(ctx: RequestContext, services: Services,
                                  results: list[tuple[str, list[PartitionResult]]],
                                  appended: dict[tuple[str, int], int], timeout_s: float
                                  ) -> list[bytes]:
    done = await _until_replicated(services, results, appended, timeout_s)
    return [_encode(ctx, services, done)]


async def _until_replicated(services: Services, results: list[tuple[str, list[PartitionResult]]],
                            appended: dict[tuple[str, int], int], timeout_s: float
                            ) -> list[tuple[str, list[PartitionResult]]]:
    """acks=all: each appended partition answers once every ISR member has its batches (or
    with the error that ended the wait), all waiting at once within the request's timeout."""
    keys = list(appended)
    codes = dict(zip(keys, await asyncio.gather(*(
        services.replicas.until_replicated(t, p, appended[(t, p)], timeout_s)
        for t, p in keys)), strict=True))
    out = []
    for name, answers in results:
        done = []
        for answer in answers:
            code = codes.get((name, answer.index), answer.error_code)
            if code != answer.error_code:
                answer = PartitionResult(answer.index, code, -1, -1, -1, _WAIT_ERRORS.get(code))
            done.append(answer)
        out.append((name, done))
    return out


_WAIT_ERRORS = {
    ErrorCode.not_enough_replicas_after_append:
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    ErrorCode.request_timed_out: "The in-sync replicas did not all get the records in time.",
    ErrorCode.not_leader_or_follower: "Leadership moved while the records were replicated.",
}


def _endpoints(services: Services, leaders: list[int]) -> list[NodeEndpoint]:
    out = []
    for leader in leaders:
        endpoint = services.cluster.endpoint(leader, services.listener_name)
        broker = services.cluster.image.broker(leader)
        if endpoint is not None and broker is not None:
            out.append(NodeEndpoint(leader, endpoint[0], endpoint[1], broker.rack or None))
    return out


def _append(services: Services, topic: str, partition: int, records: Any,
            acks: int, appended: dict[tuple[str, int], int]) -> PartitionResult:
    try:
        if acks not in VALID_ACKS:
            raise KafkaError(ErrorCode.invalid_required_acks,
                             f"acks must be -1, 0 or 1, not {acks}")
        if topic in INTERNAL_TOPICS:  # by name, before anything else, as Kafka checks
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Cannot append to internal topic {topic}")
        if records is None:
            raise KafkaError(ErrorCode.corrupt_message, "the partition's records are null")
        result = services.replicas.append(topic, partition, records, required_acks=acks)
    except Exception as exc:
        if services.topics.metadata.get(topic) is not None:  # as Kafka: no series for unknown
            services.metrics.record_failed_produce(topic)
        return _refused(services, topic, partition, exc)
    services.metrics.record_produce(topic, result.size_bytes, result.record_count)
    appended[(topic, partition)] = result.last_offset + 1
    return PartitionResult(partition, ErrorCode.none, result.first_offset,
                           result.log_append_time, result.log_start_offset, None)


def _refused(services: Services, topic: str, partition: int, exc: Exception) -> PartitionResult:
    if isinstance(exc, NotLeaderError):
        return PartitionResult(partition, exc.code, -1, -1, -1, exc.message,
                               current_leader=(exc.leader_id, exc.leader_epoch))
    record_errors = exc.record_errors if isinstance(exc, StorageError) else ()
    # Kafka's answer to records refused by validation carries the partition's log start offset
    log_start = services.replicas.log(topic, partition).log_start_offset if record_errors else -1
    return PartitionResult(partition, error_code_for(exc), -1, -1, log_start,
                           error_message_for(exc), record_errors)
