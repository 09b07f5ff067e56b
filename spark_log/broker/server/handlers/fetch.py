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
from collections.abc import Callable
from typing import Any

from spark_log.broker.errors import KafkaError, UnknownTopicError, error_code_for
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.fetch_request import FetchRequest
from spark_log.protocol.fetch_response import encode_plain_fetch_response
from spark_log.storage.log.file_records import FetchSlice, slice_next_offset
from spark_log.storage.log.partition_log import PartitionLog

READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.FETCH)
async def handle_fetch(ctx: RequestContext, request: FetchRequest
                       ) -> dict[str, Any] | list[Any]:
    """The answer's frame parts when no partition sets a tagged field, else its values."""
    services = ctx.services
    if request.session_id != 0:
        return {"throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found,
                "session_id": 0, "responses": []}
    topics = [_resolve(services, t) for t in request.topics]
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    replica_id = request.replica_id  # -1: a consumer (v15+: from replica_state)
    wanted = None
    while True:
        responses, size, errored, tagged = _read(services, request, topics, replica_id)
        remaining = deadline - time.monotonic()
        if size >= request.min_bytes or errored or remaining <= 0:
            break
        if wanted is None:  # only a fetch that waits needs them
            wanted = [(name, p.partition) for name, _, t in topics if name for p in t.partitions]
        if not wanted:
            break
        await services.replicas.wait_for_append(wanted, remaining)
    if replica_id < 0 and size:
        for t in responses:
            if t["topic"]:
                services.metrics.record_fetch(t["topic"], [p["records"] for p in t["partitions"]])
    if not tagged:  # the usual answer: written straight from these values
        return encode_plain_fetch_response(ctx.header.correlation_id, ctx.version,
                                           ErrorCode.none, 0, responses)
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
    topic_id, name = topic.topic_id, topic.topic
    metadata = services.topics.metadata
    if name is None:
        info = metadata.by_id(topic_id) if topic_id else None
        return (info.name if info else None), topic_id or ZERO_UUID, topic
    info = metadata.get(name)
    return name, (info.topic_id if info else ZERO_UUID), topic


def _read(services: Services, request: Any, topics: list[tuple[str | None, uuid.UUID, Any]],
          replica_id: int) -> tuple[list[dict[str, Any]], int, bool, bool]:
    """The topics' entries, their records' size, whether any partition failed, and whether any
    partition's entry sets a tagged field (a current leader or a diverging epoch)."""
    budget = request.max_bytes
    total = 0
    errored = tagged = False
    responses = []
    for name, topic_id, topic in topics:
        partitions = []
        for p in topic.partitions:
            if replica_id >= 0:
                entry = _read_for_follower(services, replica_id, name, p, budget - total,
                                           first=total == 0)
            else:
                entry = _read_partition(services, request, name, p, budget - total,
                                        first=total == 0)
            records = entry["records"]
            total += len(records) if type(records) is bytes else records.size
            if entry["error_code"] != ErrorCode.none or "diverging_epoch" in entry:
                errored = True
                tagged |= "current_leader" in entry or "diverging_epoch" in entry
            partitions.append(entry)
        responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
    return responses, total, errored, tagged


def _read_partition(services: Services, request: Any, name: str | None, p: Any, budget: int,
                    first: bool) -> dict[str, Any]:
    """A consumer's fetch: up to the high watermark (read_uncommitted) or the last stable
    offset (read_committed)."""
    def read(entry: dict[str, Any], name: str) -> None:
        log = services.replicas.log_at_epoch(name, p.partition, p.current_leader_epoch)
        hw, lso, entry["log_start_offset"] = log.fetch_offsets()
        entry["high_watermark"], entry["last_stable_offset"] = hw, lso
        committed = request.isolation_level == READ_COMMITTED
        limit = max(0, min(p.partition_max_bytes, budget))
        records = log.read(p.fetch_offset, limit, max_offset=lso if committed else hw,
                           min_one_batch=first)
        entry["records"] = records
        if committed:
            entry["aborted_transactions"] = _aborted(log, p.fetch_offset, records)

    return _answer(services, name, p, read)


def _aborted(log: PartitionLog, fetch_offset: int, records: FetchSlice) -> list[dict[str, int]]:
    """(producer id, first offset) of the aborted transactions overlapping the batches a
    read_committed fetch returns, for the consumer to drop their records."""
    if records.size == 0:
        return []
    end = slice_next_offset(records)
    if end is None:  # unreadable slice: a looser bound lists more, never fewer
        end = log.last_stable_offset
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in log.aborted_transactions(fetch_offset, end)]


def _read_for_follower(services: Services, replica_id: int, name: str | None, p: Any,
                       budget: int, first: bool) -> dict[str, Any]:
    """A follower's fetch: up to the log end, telling the leader how far the follower got."""
    def read(entry: dict[str, Any], name: str) -> None:
        services.replicas.check_leader_epoch(name, p.partition, p.current_leader_epoch)
        found = services.replicas.read_for_follower(
            name, p.partition, replica_id, p.fetch_offset,
            p.last_fetched_epoch, max(0, min(p.partition_max_bytes, budget)),
            first)
        entry.update(high_watermark=found.high_watermark,
                     last_stable_offset=found.high_watermark,
                     log_start_offset=found.log_start_offset, records=found.records)
        if found.diverging is not None:
            entry["diverging_epoch"] = {"epoch": found.diverging[0],
                                        "end_offset": found.diverging[1]}

    return _answer(services, name, p, read)


def _answer(services: Services, name: str | None, p: Any,
            read: Callable[[dict[str, Any], str], None]) -> dict[str, Any]:
    """One partition's entry: filled by `read` (which checks the leader epoch first), or the
    error."""
    entry: dict[str, Any] = {
        "partition_index": p.partition, "error_code": ErrorCode.none, "high_watermark": -1,
        "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
        "preferred_read_replica": -1, "records": b"",
    }
    try:
        if name is None:
            raise KafkaError(ErrorCode.unknown_topic_id)
        read(entry, name)
    except UnknownTopicError:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
    except NotLeaderError as exc:
        entry.update(error_code=exc.code, current_leader={"leader_id": exc.leader_id,
                                                          "leader_epoch": exc.leader_epoch})
    except Exception as exc:
        entry["error_code"] = error_code_for(exc)
    return entry
