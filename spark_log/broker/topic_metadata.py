"""Cluster metadata of topics: names, ids, partition counts and per-topic config overrides.

What a KRaft controller keeps in `__cluster_metadata`, this broker keeps in one JSON file,
`<data-dir>/topics.json`, rewritten atomically (temp file, fsync, rename, directory fsync) on every
change. If the file is lost, topics are rebuilt from the partition directories on disk with
default configs, so stored data is never orphaned. Topic-name rules are Kafka's.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
FILE_NAME = "topics.json"
FORMAT_VERSION = 1


class InvalidTopicError(ValueError):
    """INVALID_TOPIC_EXCEPTION: a name Kafka would not accept."""


class TopicExistsError(ValueError):
    """TOPIC_ALREADY_EXISTS."""


class UnknownTopicError(KeyError):
    """UNKNOWN_TOPIC_OR_PARTITION."""


class InvalidPartitionsError(ValueError):
    """INVALID_PARTITIONS: a partition count below 1 or not above the current count."""


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """Kafka rejects topics that differ only by '.' vs '_' (they collide in metric names)."""
    return name.replace(".", "_")


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


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
        """Read topics.json; adopt partition directories that it does not know about."""
        if self._path.exists():
            doc = json.loads(self._path.read_text())
            for entry in doc.get("topics", []):
                info = TopicInfo(
                    entry["name"], uuid.UUID(entry["id"]), int(entry["partitions"]),
                    dict(entry.get("configs", {})),
                )
                self._topics[info.name] = info
        adopted = self._adopt(partition_dirs)
        if adopted:
            log.warning("adopted topics found on disk but missing from %s: %s",
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
                self._topics[topic] = TopicInfo(topic, uuid.uuid4(), count, {})
                adopted.append(topic)
            elif known.partitions < count:
                self._topics[topic] = replace(known, partitions=count)
                adopted.append(topic)
        return adopted

    def _save(self) -> None:
        doc = {
            "version": FORMAT_VERSION,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
                 "configs": dict(t.configs)}
                for t in sorted(self._topics.values(), key=lambda t: t.name)
            ],
        }
        write_atomically(self._path, json.dumps(doc, indent=1).encode())

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


def write_atomically(path: Path, data: bytes) -> None:
    """Write via a temp file, fsync it, rename over `path`, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
