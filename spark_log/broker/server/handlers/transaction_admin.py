"""ListTransactions, DescribeTransactions and DescribeProducers: what
`kafka-transactions.sh` (and `spark-log`) show about transactions and producers.

ListTransactions filters by state names (unknown names are echoed back in
`unknown_state_filters`), producer ids and, from v1, a minimum running time in ms.
DescribeProducers lists each partition's producer state: epoch, last sequence and timestamp,
coordinator epoch and the first offset of an open transaction (-1 if none).
"""

from __future__ import annotations

import datetime
from typing import Any

from spark_log.broker.errors import KafkaError, UnknownTopicError, error_code_for
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.broker.transaction.transaction_metadata import TransactionMetadata, TxnState
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

# Kafka answers -1 when no transaction is open; the field is a timestamp, so say it as one.
NO_START = datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)


def _start_time(start_ms: int) -> int | datetime.datetime:
    return start_ms if start_ms >= 0 else NO_START


@handles(ApiKey.LIST_TRANSACTIONS)
async def handle_list_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    coordinator = ctx.services.transactions
    if not coordinator.loaded():
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                "unknown_state_filters": [], "transaction_states": []}
    states = {TxnState.from_display_name(name): name for name in request.state_filters}
    unknown = [name for state, name in states.items() if state is None]
    wanted_states = {s for s in states if s is not None}
    pids = set(request.producer_id_filters)
    min_duration = getattr(request, "duration_filter", -1)
    now = ctx.services.clock.now_ms()
    found = []
    for m in coordinator.transactions.values():
        if (request.state_filters and m.state not in wanted_states) or \
                (pids and m.producer_id not in pids) or \
                (min_duration >= 0 and (m.start_ms < 0 or now - m.start_ms < min_duration)):
            continue
        found.append({"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                      "transaction_state": m.state.display_name})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": unknown,
            "transaction_states": found}


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
async def handle_describe_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    coordinator = ctx.services.transactions
    return {"throttle_time": 0, "transaction_states": [
        _describe(coordinator, tid) for tid in request.transactional_ids]}


def _describe(coordinator: Any, transactional_id: str) -> dict[str, Any]:
    empty = {"transactional_id": transactional_id, "transaction_state": "",
             "transaction_timeout": 0, "transaction_start_time": NO_START, "producer_id": -1,
             "producer_epoch": -1, "topics": []}
    try:
        coordinator.ensure_ready(transactional_id)
    except KafkaError as e:
        return {**empty, "error_code": e.code}
    m: TransactionMetadata | None = coordinator.transactions.get(transactional_id)
    if m is None:
        return {**empty, "error_code": ErrorCode.transactional_id_not_found}
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        topics.setdefault(topic, []).append(partition)
    return {"error_code": ErrorCode.none, "transactional_id": transactional_id,
            "transaction_state": m.state.display_name, "transaction_timeout": m.timeout_ms,
            "transaction_start_time": _start_time(m.start_ms), "producer_id": m.producer_id,
            "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]}


@handles(ApiKey.DESCRIBE_PRODUCERS)
async def handle_describe_producers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = [_producers(ctx.services, topic.name, p) for p in topic.partition_indexes]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _producers(services: Services, topic: str, partition: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": partition, "error_code": ErrorCode.none,
                             "error_message": None, "active_producers": []}
    try:
        log = services.replicas.log(topic, partition)
        entry["active_producers"] = [
            {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
             "last_sequence": p.last_seq, "last_timestamp": p.last_timestamp,
             "coordinator_epoch": p.coordinator_epoch,
             "current_txn_start_offset": p.current_txn_first_offset}
            for p in log.active_producers()]
    except UnknownTopicError:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
    except Exception as exc:
        entry["error_code"] = error_code_for(exc)
    return entry
