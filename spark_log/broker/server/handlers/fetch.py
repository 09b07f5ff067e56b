"""Fetch: whole record batches from each requested partition, long-polling for `min_bytes`.

Records are file slices handed to the encoder untouched and sent with `os.sendfile`. A read
starts at the batch that contains the fetch offset and stops before the high watermark
(read_uncommitted) or the last stable offset (read_committed). Limits are Kafka's: at most
`partition_max_bytes` per partition and `max_bytes` in all, except that the first batch of the
first non-empty partition is returned whole so a consumer can always make progress. With less
than `min_bytes` available the fetch parks until an append to one of its partitions or
`max_wait`; an error in any partition answers at once. Incremental fetch sessions (KIP-227) are
not offered: every response carries session id 0, which clients treat as "full fetches". A
partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER with its current leader, and
the response lists where those leaders listen (KIP-951), so the consumer goes straight there.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from spark_log.broker.errors import KafkaError, UnknownTopicError, error_code_for
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import ms

READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.FETCH)
async def handle_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    session_id = getattr(request, "session_id", 0)
    if session_id != 0:
        return {"throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found,
                "session_id": 0, "responses": []}
    topics = [_resolve(services, t) for t in request.topics]
    wanted = [(name, p.partition) for name, _, t in topics if name for p in t.partitions]
    max_wait_ms = max(0, ms(request.max_wait))
    deadline = time.monotonic() + max_wait_ms / 1000
    while True:
        responses, size, errored = _read(services, request, topics)
        remaining = deadline - time.monotonic()
        if size >= request.min_bytes or errored or remaining <= 0 or not wanted:
            break
        await services.replicas.wait_for_append(wanted, remaining)
    for t in responses:
        if t["topic"]:
            services.metrics.record_fetch(t["topic"], [p["records"] for p in t["partitions"]])
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
            "responses": responses, "node_endpoints": leader_endpoints(services, responses)}


def leader_endpoints(services: Services, responses: list[dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """Where the leaders named in `current_leader` entries listen (KIP-951)."""
    leaders = {p["current_leader"]["leader_id"] for t in responses for p in t["partitions"]
               if "current_leader" in p and p["current_leader"]["leader_id"] >= 0}
    out = []
    for leader in sorted(leaders):
        endpoint = services.cluster.endpoint(leader, services.listener_name)
        broker = services.cluster.image.broker(leader)
        if endpoint is not None and broker is not None:
            out.append({"node_id": leader, "host": endpoint[0], "port": endpoint[1],
                        "rack": broker.rack or None})
    return out


def _resolve(services: Services, topic: Any) -> tuple[str | None, uuid.UUID, Any]:
    """(name or None if unknown, topic id, the request's topic entry)."""
    topic_id = getattr(topic, "topic_id", None)
    name = getattr(topic, "topic", None)
    metadata = services.topics.metadata
    if name is None:
        info = metadata.by_id(topic_id) if topic_id else None
        return (info.name if info else None), topic_id or ZERO_UUID, topic
    info = metadata.get(name)
    return name, (info.topic_id if info else ZERO_UUID), topic


def _read(services: Services, request: Any, topics: list[tuple[str | None, uuid.UUID, Any]]
          ) -> tuple[list[dict[str, Any]], int, bool]:
    budget = request.max_bytes
    total = 0
    errored = False
    responses = []
    for name, topic_id, topic in topics:
        partitions = []
        for p in topic.partitions:
            entry = _read_partition(services, request, name, p, budget - total, first=total == 0)
            size = _size(entry["records"])
            total += size
            errored |= entry["error_code"] != ErrorCode.none
            partitions.append(entry)
        responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
    return responses, total, errored


def _read_partition(services: Services, request: Any, name: str | None, p: Any, budget: int,
                    first: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition_index": p.partition, "error_code": ErrorCode.none, "high_watermark": -1,
        "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
        "preferred_read_replica": -1, "records": b"",
    }
    try:
        if name is None:
            raise KafkaError(ErrorCode.unknown_topic_id)
        services.replicas.check_leader_epoch(name, p.partition,
                                             getattr(p, "current_leader_epoch", -1))
        log = services.replicas.log(name, p.partition)
        hw = log.high_watermark
        lso = services.replicas.last_stable_offset(log)
        committed = request.isolation_level == READ_COMMITTED
        entry.update(high_watermark=hw, last_stable_offset=lso,
                     log_start_offset=log.log_start_offset)
        limit = max(0, min(p.partition_max_bytes, budget))
        records = log.read(p.fetch_offset, limit, max_offset=lso if committed else hw,
                           min_one_batch=first)
        entry["records"] = records
        if committed:
            entry["aborted_transactions"] = services.replicas.aborted_transactions(
                log, p.fetch_offset, records)
    except UnknownTopicError:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
    except NotLeaderError as exc:
        entry.update(error_code=exc.code, current_leader={"leader_id": exc.leader_id,
                                                          "leader_epoch": exc.leader_epoch})
    except Exception as exc:
        entry["error_code"] = error_code_for(exc)
    return entry


def _size(records: Any) -> int:
    return len(records) if isinstance(records, bytes) else records.size
