"""The broker's topics: names, ids, partition counts and per-topic config overrides.

What a KRaft controller keeps in `__cluster_metadata`, this broker keeps in one JSON file,
`<data-dir>/topics.json` (storage's `data_dir.topics_file`), rewritten atomically on every
change. If the file is lost, topics are rebuilt from the partition directories on disk with
default configs (the internal topics with their compact cleanup policy), so stored data is never
orphaned. A file that is there but damaged stops the start with a `ConfigError` naming it and
the fault. Topic-name rules are Kafka's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from spark_log.broker.errors import InvalidPartitionsError, TopicExistsError, UnknownTopicError
from spark_log.storage.data_dir.topics_file import (
    FILE_NAME,
    InvalidTopicError,
    TopicInfo,
    collision_key,
    read_topics_file,
    validate_topic_name,
    write_topics_file,
)

log = logging.getLogger(__name__)

# What a topic adopted from disk gets: the defaults, but an internal topic must stay compacted.
_ADOPTED_CONFIGS: Mapping[str, Mapping[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer"},
    "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed"},
}


class TopicMetadata:
    """The set of topics. Invariants: names are valid and collision-free, ids unique, partition
    counts >= 1 and never shrink. Every mutation is on disk before the method returns.
    Not thread-safe: the broker calls it from its event loop thread only."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir
        self._path = data_dir / FILE_NAME
        self._topics: dict[str, TopicInfo] = {}

    # ---- loading and saving -------------------------------------------------------------
    def load(self, partition_dirs: Iterable[tuple[str, int]] = ()) -> None:
        """Read topics.json (ConfigError, before anything is written, if it is damaged); adopt
        partition directories that it does not know about."""
        for info in read_topics_file(self._path):
            self._topics[info.name] = info
        adopted = self._adopt(partition_dirs)
        if adopted:
            log.warning("adopted topics found on disk but missing from %s (a new one gets "
                        "default configs, an internal one compaction): %s",
                        FILE_NAME, ", ".join(sorted(adopted)))
            self._save()

    def _adopt(self, partition_dirs: Iterable[tuple[str, int]]) -> list[str]:
        counts: dict[str, int] = {}
        for topic, partition in partition_dirs:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        adopted = []
        for topic, count in counts.items():
            known = self._topics.get(topic)
            if known is None:
                configs = dict(_ADOPTED_CONFIGS.get(topic, {}))
                self._topics[topic] = TopicInfo(topic, uuid.uuid4(), count, configs)
                adopted.append(topic)
            elif known.partitions < count:
                self._topics[topic] = replace(known, partitions=count)
                adopted.append(topic)
        return adopted

    def _save(self) -> None:
        write_topics_file(self._path, self._topics.values())

    # ---- queries ---------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(name)
        return info

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def all(self) -> list[TopicInfo]:
        return [self._topics[n] for n in sorted(self._topics)]

    # ---- changes ---------------------------------------------------------------------------
    def check_new(self, name: str, partitions: int) -> None:
        """Raise the error CreateTopics would answer for this name and partition count."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        key = collision_key(name)
        clash = next((t for t in self._topics if collision_key(t) == key), None)
        if clash is not None:
            raise InvalidTopicError(
                f"Topic '{name}' collides with existing topic: {clash} "
                "(topics that differ only by '.' and '_' collide)"
            )
        if partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")

    def create(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo:
        self.check_new(name, partitions)
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs))
        self._topics[name] = info
        self._save()
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.require(name)
        del self._topics[name]
        self._save()
        return info

    def check_partition_increase(self, name: str, count: int) -> TopicInfo:
        info = self.require(name)
        if count <= info.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {info.partitions} partitions, which is higher than or "
                f"equal to the requested {count}."
            )
        return info

    def set_partitions(self, name: str, count: int) -> TopicInfo:
        info = replace(self.check_partition_increase(name, count), partitions=count)
        self._topics[name] = info
        self._save()
        return info

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        info = replace(self.require(name), configs=dict(configs))
        self._topics[name] = info
        self._save()
        return info


