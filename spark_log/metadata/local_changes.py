"""What a delta changes for one broker (Kafka's TopicsDelta.localChanges and
LocalReplicaChanges): the partitions it no longer hosts, the partitions it leads or follows
whose state changed, and the topics deleted — what a broker acts on after applying a delta
(stop and delete replicas, become leader, start fetching from a new leader).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple
from uuid import UUID

from .image import TopicImage
from .partition_registration import PartitionRegistration

__all__ = ["LocalReplicaChanges", "PartitionInfo", "TopicPartition", "local_replica_changes"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class PartitionInfo(NamedTuple):
    """A partition's new state, with its topic's id."""

    topic_id: UUID
    partition: PartitionRegistration


@dataclass(frozen=True)
class LocalReplicaChanges:
    """The changes one broker acts on.

    `deletes`: partitions the broker hosted before and no longer hosts (moved away, or their
    topic deleted). `leaders`: partitions the broker leads whose partition epoch changed (new,
    or ISR or replicas changed); `elected_leaders` the subset whose leader epoch changed (the
    broker just became their leader). `followers`: partitions the broker hosts without leading
    whose partition epoch changed. `topic_ids`: the ids of the topics in leaders and followers.
    `deleted_topics`: every topic the delta deleted, by id, with its name.
    """

    deletes: frozenset[TopicPartition]
    elected_leaders: Mapping[TopicPartition, PartitionInfo]
    leaders: Mapping[TopicPartition, PartitionInfo]
    followers: Mapping[TopicPartition, PartitionInfo]
    topic_ids: Mapping[str, UUID]
    deleted_topics: Mapping[UUID, str]

    __hash__ = None  # type: ignore[assignment]  # holds mappings


def local_replica_changes(
    broker_id: int,
    before: Mapping[UUID, TopicImage],
    changed: Iterable[TopicImage],
    deleted: Mapping[UUID, str],
    replaced: bool = False,
) -> LocalReplicaChanges:
    """The changes for `broker_id` of a delta over topics `before`: `changed` holds, per topic
    the delta touched, only the partitions it wrote; `deleted` the topics it removed. With
    `replaced` (a snapshot), partitions of a changed topic the delta did not write are gone."""
    deletes: set[TopicPartition] = set()
    elected: dict[TopicPartition, PartitionInfo] = {}
    leaders: dict[TopicPartition, PartitionInfo] = {}
    followers: dict[TopicPartition, PartitionInfo] = {}
    topic_ids: dict[str, UUID] = {}
    for topic in changed:
        previous = before.get(topic.id)
        old_partitions = previous.partitions if previous is not None else {}
        for pid, partition in topic.partitions.items():
            key = TopicPartition(topic.name, pid)
            info = PartitionInfo(topic.id, partition)
            old = old_partitions.get(pid)
            if broker_id not in partition.replicas:
                if old is not None and broker_id in old.replicas:
                    deletes.add(key)
                continue
            if old is not None and old.partition_epoch == partition.partition_epoch:
                continue
            topic_ids.setdefault(topic.name, topic.id)
            if partition.leader != broker_id:
                followers[key] = info
                continue
            leaders[key] = info
            if old is None or old.leader_epoch != partition.leader_epoch:
                elected[key] = info
        if replaced and previous is not None:
            deletes.update(_hosted(broker_id, previous, skip=topic.partitions))
    for topic_id in deleted:
        if topic_id in before:
            deletes.update(_hosted(broker_id, before[topic_id]))
    return LocalReplicaChanges(
        deletes=frozenset(deletes),
        elected_leaders=MappingProxyType(elected),
        leaders=MappingProxyType(leaders),
        followers=MappingProxyType(followers),
        topic_ids=MappingProxyType(topic_ids),
        deleted_topics=MappingProxyType(dict(deleted)),
    )


def _hosted(broker_id: int, topic: TopicImage, skip: Mapping[int, object] = MappingProxyType({})
            ) -> Iterable[TopicPartition]:
    return (TopicPartition(topic.name, pid) for pid, partition in topic.partitions.items()
            if pid not in skip and broker_id in partition.replicas)
