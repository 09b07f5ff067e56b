"""Topics, partition leaders and offsets of a cluster over the wire: Metadata v4 and
ListOffsets v2, with the group offsets of `group_offsets` on the same connections.

Metadata v4 never creates a topic it is asked about. ListOffsets goes to each partition's leader,
one request per leader for all of its partitions; partitions whose answer is retriable (a leader
moving, a topic just created) are asked again, after a metadata refresh, within the client's
timeout. Timestamps follow Kafka: -2 the log start, -1 the end (the high watermark, or the last
stable offset with read_committed), else the first offset whose timestamp is at or after it (-1
when there is none).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

from .group_offsets import GroupOffsetsClient
from .wire import MAX_BACKOFF_S, WireError

TopicPartition = tuple[str, int]
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class OffsetsClient(GroupOffsetsClient):
    """Metadata, ListOffsets, OffsetFetch and OffsetCommit. Not thread-safe; close it."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0,
                 client_id: str = "spark-log") -> None:
        super().__init__(bootstrap, timeout_s, client_id)
        self._leaders: dict[TopicPartition, str] = {}

    def topics(self, names: Iterable[str] | None = None) -> dict[str, list[int]]:
        """Topic -> sorted partition ids, of `names` (None: every topic); topics that do not
        exist are left out. Remembers each partition's leader for `list_offsets`."""
        wanted = None if names is None else [{"name": n} for n in sorted(set(names))]
        meta = self.any_broker(ApiKey.METADATA, 4, {"topics": wanted,
                                                    "allow_auto_topic_creation": False})
        address = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
        result: dict[str, list[int]] = {}
        for t in meta.topics:
            if t.error_code != ErrorCode.none:
                continue
            result[t.name] = sorted(p.partition_index for p in t.partitions)
            for p in t.partitions:
                leader = address.get(p.leader_id)
                if leader is None:
                    self._leaders.pop((t.name, p.partition_index), None)
                else:
                    self._leaders[(t.name, p.partition_index)] = leader
        return result

    def list_offsets(self, timestamps: Mapping[TopicPartition, int],
                     isolation: int = READ_COMMITTED) -> dict[TopicPartition, int]:
        """The offset for each partition's timestamp. Raises WireError for an error that is
        not retriable, or for a retriable one still there at the timeout; OSError when the
        leader cannot be reached within it."""
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.02
        result: dict[TopicPartition, int] = {}
        todo = dict(timestamps)
        while todo:
            if any(tp not in self._leaders for tp in todo):
                self.topics({t for t, _ in todo})
            failure: Exception | None = None
            retry: dict[TopicPartition, int] = {}
            for address, tps in _by_leader(todo, self._leaders).items():
                if address is None:
                    retry.update({tp: todo[tp] for tp in tps})
                    failure = WireError(ErrorCode.leader_not_available, f"ListOffsets for "
                                        f"{tps[0][0]}-{tps[0][1]}")
                    continue
                try:
                    answer = self.request(address, ApiKey.LIST_OFFSETS, 2,
                                          _request(tps, todo, isolation))
                except OSError as e:
                    retry.update({tp: todo[tp] for tp in tps})
                    failure = e
                    continue
                got = _answers(answer)
                for tp in tps:
                    code, offset = got.get(tp, (ErrorCode.unknown_server_error, -1))
                    if code == ErrorCode.none:
                        result[tp] = offset
                        continue
                    error = WireError(code, f"ListOffsets for {tp[0]}-{tp[1]}")
                    if not code.retriable:
                        raise error
                    retry[tp] = todo[tp]
                    failure = error
            for tp in retry:
                self._leaders.pop(tp, None)
            todo = retry
            if todo:
                if time.monotonic() + backoff > deadline:
                    assert failure is not None
                    raise failure
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        return result


def _by_leader(todo: Mapping[TopicPartition, int], leaders: Mapping[TopicPartition, str]
               ) -> dict[str | None, list[TopicPartition]]:
    groups: dict[str | None, list[TopicPartition]] = {}
    for tp in sorted(todo):
        groups.setdefault(leaders.get(tp), []).append(tp)
    return groups


def _request(tps: list[TopicPartition], timestamps: Mapping[TopicPartition, int],
             isolation: int) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "timestamp": timestamps[(topic, partition)]})
    return {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def _answers(answer: Any) -> dict[TopicPartition, tuple[ErrorCode, int]]:
    return {(t.name, p.partition_index): (ErrorCode(p.error_code), int(p.offset))
            for t in answer.topics for p in t.partitions}
