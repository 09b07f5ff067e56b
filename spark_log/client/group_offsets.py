"""Reading and committing a consumer group's offsets, with their metadata strings, as a group
without members does (generation -1: Kafka's "simple" consumer groups, and what
AdminClient.alterConsumerGroupOffsets sends).

OffsetFetch v5 and OffsetCommit v7 go to the group's coordinator (FindCoordinator, key type 0)
and are retried while it loads or moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

from .wire import GROUP_KEY, WireClient

TopicPartition = tuple[str, int]
Committed = tuple[int, str | None]  # (offset, metadata)


class GroupOffsetsClient(WireClient):
    """OffsetFetch / OffsetCommit for member-less groups. Not thread-safe; close it."""

    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None
              ) -> dict[TopicPartition, Committed]:
        """The group's committed (offset, metadata) per partition — of `partitions`, or of
        every partition it has an offset for; partitions without one are left out."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": sorted(ps)} for t, ps in by_topic.items()]
        answer = self.coordinated(group, GROUP_KEY, ApiKey.OFFSET_FETCH, 5,
                                  {"group_id": group, "topics": topics}, _fetch_error)
        return {(t.name, p.partition_index): (int(p.committed_offset), p.metadata)
                for t in answer.topics for p in t.partitions if p.committed_offset >= 0}

    def commit(self, group: str, offsets: Mapping[TopicPartition, Committed]) -> None:
        """Store `offsets` (offset, metadata) as the group's committed offsets, atomically."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata) in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": metadata})
        self.coordinated(group, GROUP_KEY, ApiKey.OFFSET_COMMIT, 7, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
            _commit_error)


def _fetch_error(answer: Any) -> int:
    if answer.error_code != ErrorCode.none:
        return int(answer.error_code)
    return next((int(p.error_code) for t in answer.topics for p in t.partitions
                 if p.error_code != ErrorCode.none), 0)


def _commit_error(answer: Any) -> int:
    return next((int(p.error_code) for t in answer.topics for p in t.partitions
                 if p.error_code != ErrorCode.none), 0)
