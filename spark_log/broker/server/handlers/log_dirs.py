"""DescribeLogDirs: the size of each partition's log in this broker's one log directory, as
`kafka-log-dirs.sh --describe` and `spark-log topics describe` read them.

The broker has a single log directory (`log.dirs`); every partition lives there, never as a
"future" replica, and the offset lag (log end offset minus high watermark) is always 0 with one
replica. Topics or partitions the broker does not have are left out, as Kafka leaves them out.
A directory taken offline by a storage error answers KAFKA_STORAGE_ERROR with no partitions.
"""

from __future__ import annotations

import shutil
from typing import Any

from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey


@handles(ApiKey.DESCRIBE_LOG_DIRS)
async def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    services = ctx.services
    if services.logs.failure.failed:  # offline: no partition can be described, as in Kafka
        result = {"error_code": ErrorCode.kafka_storage_error, "log_dir": str(services.data_dir),
                  "topics": [], "total_bytes": -1, "usable_bytes": -1}
        return {"throttle_time": 0, "error_code": ErrorCode.none, "results": [result]}
    wanted = _wanted(request.topics)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in sorted(services.logs.partitions()):
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        log = services.logs.get(topic, partition)
        if log is None:
            continue
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "partition_size": log.size_bytes,
            "offset_lag": max(0, log.log_end_offset - log.high_watermark),
            "is_future_key": False})
    usage = shutil.disk_usage(services.data_dir)
    result = {"error_code": ErrorCode.none, "log_dir": str(services.data_dir),
              "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
              "total_bytes": usage.total, "usable_bytes": usage.free}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": [result]}


def _wanted(topics: Any) -> dict[str, set[int]] | None:
    if topics is None:
        return None
    return {t.topic: set(t.partitions) for t in topics}
