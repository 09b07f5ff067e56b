"""Applying each new metadata image to what this broker holds (Kafka's BrokerMetadataPublisher):
the logs of the partitions it hosts are opened or created with their topic's config, the logs of
partitions it no longer hosts are deleted, configs changed by the image reach the logs, and
each hosted partition's leadership (leader, leader epoch, replicas, ISR) reaches the replica
manager — in log order, one image at a time.

Only what the log says is acted on: a partition directory on disk that no image hosts here is
left alone until the broker has caught up with the whole log (`stray_partitions`), so a broker
replaying an old prefix of the log never deletes data a later record keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from spark_log.broker.cluster.metadata_cache import MetadataCache
from spark_log.metadata import (
    ConfigResource,
    ConfigResourceType,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
)
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class Logs(Protocol):
    """The log manager, as far as the publisher uses it."""

    def get(self, topic: str, partition: int) -> PartitionLog | None: ...

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None
                      ) -> PartitionLog: ...

    def delete(self, topic: str, partition: int) -> bool: ...

    def update_config(self, topic: str, config: LogConfig) -> None: ...

    def partitions(self) -> list[TopicPartition]: ...


class Leadership(Protocol):
    """The replica manager, as far as the publisher uses it."""

    def update_partition(self, topic: str, partition: int,
                         state: PartitionRegistration) -> None: ...

    def forget_partition(self, topic: str, partition: int) -> None: ...


class MetadataPublisher:
    """Invariant: after `publish(delta, image)` returns, every partition `image` hosts on this
    broker has an open log with its topic's config and its leadership known to the replica
    manager, and the cache holds `image`. Not thread-safe (the broker's event loop)."""

    def __init__(self, node_id: int, cache: MetadataCache, logs: Logs, leadership: Leadership,
                 config_for: Callable[[MetadataImage, str], LogConfig]) -> None:
        self.node_id, self.cache, self.logs, self.leadership = node_id, cache, logs, leadership
        self.config_for = config_for
        # Called with the names of deleted topics (the group coordinator drops their offsets).
        self.on_topics_deleted: list[Callable[[Iterable[str]], None]] = []
        # Called with (topic, partition, leader epoch) when this broker becomes a partition's
        # leader, and with (topic, partition) when it stops leading one it hosted (the
        # coordinators load and unload their internal partitions).
        self.on_elected: list[Callable[[str, int, int], None]] = []
        self.on_resigned: list[Callable[[str, int], None]] = []

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        before = self.cache.image
        changes = delta.local_changes(self.node_id)
        for topic, partition in sorted(changes.deletes):
            self.leadership.forget_partition(topic, partition)
            if self.logs.delete(topic, partition):
                log.info("Deleted the log of %s-%d: no longer hosted here", topic, partition)
        self.cache.update(image)
        for topic in _topics_with_new_configs(before, image):
            if image.topic(topic) is not None:
                self.logs.update_config(topic, self.config_for(image, topic))
        hosted = {**changes.followers, **changes.leaders}
        configs: dict[str, LogConfig] = {}  # built once per topic, and only for new logs
        for (topic, partition), info in sorted(hosted.items()):
            if self.logs.get(topic, partition) is None:
                if topic not in configs:
                    configs[topic] = self.config_for(image, topic)
                self.logs.get_or_create(topic, partition, configs[topic])
            self.leadership.update_partition(topic, partition, info.partition)
        for (topic, partition) in sorted({*changes.followers, *changes.deletes}):
            for resigned in self.on_resigned:
                resigned(topic, partition)
        for (topic, partition), info in sorted(changes.elected_leaders.items()):
            for elected in self.on_elected:
                elected(topic, partition, info.partition.leader_epoch)
        deleted = sorted(changes.deleted_topics.values())
        if deleted:
            for callback in self.on_topics_deleted:
                callback(deleted)

    def stray_partitions(self) -> list[TopicPartition]:
        """Partitions with a log here that the current image does not host on this broker
        (deleted or moved while this broker was away): call once caught up with the log."""
        image = self.cache.image
        stray = []
        for topic, partition in self.logs.partitions():
            state = image.partition(topic, partition)
            if state is None or self.node_id not in state.replicas:
                stray.append((topic, partition))
        return stray


def _topics_with_new_configs(before: MetadataImage, after: MetadataImage) -> list[str]:
    topics = {r.name for r in (*before.configs, *after.configs)
              if r.type == ConfigResourceType.TOPIC}
    return sorted(t for t in topics
                  if before.configs.get(_topic(t)) != after.configs.get(_topic(t)))


def _topic(name: str) -> ConfigResource:
    return ConfigResource(ConfigResourceType.TOPIC, name)
