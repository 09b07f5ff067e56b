"""The transactional APIs: InitProducerId (transactional ids), AddPartitionsToTxn v0-3,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit and WriteTxnMarkers v1.

They translate wire versions to `services.transactions` (the transaction coordinator) and, for
TxnOffsetCommit, `services.groups`. Clients that predate KIP-588 do not know PRODUCER_FENCED:
as Kafka does, they get INVALID_PRODUCER_EPOCH instead (InitProducerId before v4, the Add*ToTxn
and EndTxn requests before v2). AddPartitionsToTxn answers per partition: a partition that does
not exist gets UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from typing import Any

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group_requests import PartitionCommit
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.broker.transaction.transaction_metadata import ProducerIdAndEpoch
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import ms

FENCED_FROM = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
               ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2}


def _code(ctx: RequestContext, error: KafkaError) -> ErrorCode:
    first = FENCED_FROM.get(ctx.header.api_key)
    if error.code == ErrorCode.producer_fenced and first is not None and ctx.version < first:
        return ErrorCode.invalid_producer_epoch
    return error.code


async def init_transactional_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    """InitProducerId with a transactional id (called by the InitProducerId handler)."""
    pid = getattr(request, "producer_id", -1)
    expected = ProducerIdAndEpoch(pid, request.producer_epoch) if pid >= 0 else None
    await ctx.services.transactions.prepare()  # __transaction_state, created on first use
    try:
        await ctx.services.producer_ids.ready()  # no await from here to init_producer_id
        producer_id, epoch = ctx.services.transactions.init_producer_id(
            request.transactional_id, ms(request.transaction_timeout), expected)
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": _code(ctx, e), "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id,
            "producer_epoch": epoch}


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {(t, p) for t, p in wanted if not _exists(services, t, p)}
    if unknown:
        errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown
                  else ErrorCode.operation_not_attempted for tp in wanted}
    else:
        try:
            services.transactions.add_partitions(
                request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, wanted)
            code = ErrorCode.none
        except KafkaError as e:
            code = _code(ctx, e)
        errors = dict.fromkeys(wanted, code)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "partition_error_code": code})
    return {"throttle_time": 0, "results_by_topic_v3_and_below": [
        {"name": name, "results_by_partition": results} for name, results in topics.items()]}


def _exists(services: Services, topic: str, partition: int) -> bool:
    info = services.topics.metadata.get(topic)
    return info is not None and 0 <= partition < info.partitions


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    try:
        if not request.group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        # Only the group's partition joins the transaction here; its coordinator (maybe on
        # another broker) answers the TxnOffsetCommit that follows.
        ctx.services.transactions.add_offsets(request.transactional_id, request.producer_id,
                                            request.producer_epoch, request.group_id)
        code = ErrorCode.none
    except KafkaError as e:
        code = _code(ctx, e)
    return {"throttle_time": 0, "error_code": code}


@handles(ApiKey.END_TXN)
async def handle_end_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    try:
        ctx.services.transactions.end_transaction(request.transactional_id, request.producer_id,
                                                request.producer_epoch, request.committed)
        code = ErrorCode.none
    except KafkaError as e:
        code = _code(ctx, e)
    return {"throttle_time": 0, "error_code": code}


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    commits, slots = [], []
    answers: list[dict[str, Any]] = []
    for topic in request.topics:
        partitions: list[dict[str, Any]] = []
        answers.append({"name": topic.name, "partitions": partitions})
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": ErrorCode.none}
            partitions.append(entry)
            if not _exists(services, topic.name, p.partition_index):
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                continue
            commits.append(PartitionCommit(topic.name, p.partition_index, p.committed_offset,
                                           getattr(p, "committed_leader_epoch", -1),
                                           p.committed_metadata))
            slots.append(entry)
    try:
        codes = services.groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, commits,
            getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None)) if commits else []
    except KafkaError as e:
        codes = [e.code] * len(slots)
    for entry, code in zip(slots, codes, strict=True):
        entry["error_code"] = code
    return {"throttle_time": 0, "topics": answers}


@handles(ApiKey.WRITE_TXN_MARKERS)
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    """From another broker's transaction coordinator, or a tool: write the given markers to
    the partitions this broker leads (NOT_LEADER_OR_FOLLOWER for the others; the sender asks
    their leader)."""
    transactions = ctx.services.transactions
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = [{"partition_index": p, "error_code": transactions.write_marker(
                topic.name, p, marker.producer_id, marker.producer_epoch,
                marker.transaction_result, marker.coordinator_epoch)}
                for p in topic.partition_indexes]
            topics.append({"name": topic.name, "partitions": partitions})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}
