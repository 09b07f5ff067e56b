"""ListOffsets and OffsetForLeaderEpoch: offsets by position, by timestamp, and by leader epoch.

ListOffsets' special timestamps are Kafka's: -1 latest (the high watermark, or the last stable
offset for read_committed), -2 earliest (the log start offset), -3 the record with the largest
timestamp (v7+). A timestamp search answers the first offset whose timestamp is at or after
the target, but never one a consumer of that isolation level could not yet read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from spark_log.broker.errors import KafkaError, UnknownTopicError, error_code_for
from spark_log.broker.server.handlers.fetch import READ_COMMITTED
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


@handles(ApiKey.LIST_OFFSETS)
async def handle_list_offsets(ctx: RequestContext, request: Any) -> dict[str, Any]:
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    follower = getattr(request, "replica_id", -1) >= 0  # a replica sees up to the log end
    topics = []
    for topic in request.topics:
        counts = Counter(p.partition_index for p in topic.partitions)
        partitions = [_list_offset(ctx.services, topic.name, p, committed,
                                   counts[p.partition_index] > 1, follower)
                      for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _list_offset(services: Services, topic: str, p: Any, committed: bool,
                 duplicate: bool, follower: bool = False) -> dict[str, Any]:
    entry = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
             "timestamp": -1, "offset": -1, "leader_epoch": -1}
    try:
        if duplicate:
            raise KafkaError(ErrorCode.invalid_request, "partition listed twice")
        services.replicas.check_leader_epoch(topic, p.partition_index,
                                             getattr(p, "current_leader_epoch", -1))
        log = services.replicas.log(topic, p.partition_index)
        leader_epoch = services.replicas.leader_epoch(topic, p.partition_index)
        if not follower and not services.replicas.high_watermark_settled(topic,
                                                                          p.partition_index):
            raise KafkaError(ErrorCode.offset_not_available,
                             f"{topic}-{p.partition_index}: the new leader's high watermark "
                             f"is not yet caught up")
        visible = log.log_end_offset if follower else \
            services.replicas.last_stable_offset(log) if committed else log.high_watermark
        if p.timestamp == LATEST:
            entry.update(offset=visible, leader_epoch=leader_epoch)
        elif p.timestamp == EARLIEST:
            start = log.log_start_offset
            epoch = log.leader_epoch_cache.epoch_for_offset(start)
            entry.update(offset=start, leader_epoch=leader_epoch if epoch is None else epoch)
        elif p.timestamp < MAX_TIMESTAMP:
            raise KafkaError(ErrorCode.invalid_request,
                             f"unknown special timestamp {p.timestamp}")
        else:
            found = log.list_offset(p.timestamp)
            if found is not None and found.offset < visible:
                epoch = found.leader_epoch
                entry.update(timestamp=found.timestamp, offset=found.offset,
                             leader_epoch=-1 if epoch is None else epoch)
    except UnknownTopicError:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
    except Exception as exc:
        entry["error_code"] = error_code_for(exc)
    return entry


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"error_code": ErrorCode.none, "partition": p.partition,
                     "leader_epoch": -1, "end_offset": -1}
            try:
                ctx.services.replicas.check_leader_epoch(topic.topic, p.partition,
                                                         p.current_leader_epoch)
                log = ctx.services.replicas.log(topic.topic, p.partition)
                epoch, end = log.leader_epoch_cache.end_offset_for(p.leader_epoch,
                                                                   log.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except UnknownTopicError:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            except Exception as exc:
                entry["error_code"] = error_code_for(exc)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
