"""Cluster metadata of topics: names, ids, partition counts and per-topic config overrides.

What a KRaft controller keeps in `__cluster_metadata`, this broker keeps in one JSON file,
`<data-dir>/topics.json`, rewritten atomically (temp file, fsync, rename, directory fsync) on every
change. If the file is lost, topics are rebuilt from the partition directories on disk with
default configs (the internal topics with their compact cleanup policy), so stored data is never
orphaned. A file that is there but damaged stops the start with a `ConfigError` naming it and
the fault: a topic's configs cannot be guessed (a `delete` policy guessed for a compacted topic
would let retention delete its data), so the operator restores the file or moves it away.
Topic-name rules are Kafka's.
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
from typing import Any

from spark_log.storage.errors import InvalidConfigurationError
from spark_log.storage.log_config import LogConfig

from .broker_config import ConfigError

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
FILE_NAME = "topics.json"
FORMAT_VERSION = 1
_NIL_ID = uuid.UUID(int=0)
# What a topic adopted from disk gets: the defaults, but an internal topic must stay compacted.
_ADOPTED_CONFIGS: Mapping[str, Mapping[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer"},
    "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed"},
}
_WHAT_TO_DO = ("the topics' configs cannot be guessed, so restore the file from a backup, or "
               "move it away to have the topics rebuilt from the partition directories with "
               "default configs (each topic's own settings are then lost)")


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


def read_topics_file(path: Path) -> list[TopicInfo]:
    """The topics `path` lists, none if there is no such file; ConfigError naming the file,
    what is wrong with it and what to do, if it cannot be used as it is."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise _damaged(path, f"cannot be read ({e.strerror})") from None
    if not text.strip():
        raise _damaged(path, "empty file")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, absurd nesting or numbers
        raise _damaged(path, f"not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise _damaged(path, 'not the expected structure (an object with a "topics" list)')
    version = doc.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise _damaged(path, f"unknown version {version!r} (expected {FORMAT_VERSION})")
    topics: dict[str, TopicInfo] = {}
    ids: dict[uuid.UUID, str] = {}
    for n, entry in enumerate(doc["topics"]):
        info = _topic_of(path, n, entry)
        if info.name in topics:
            raise _damaged(path, f"topic {info.name!r} is listed twice")
        if info.topic_id in ids:
            raise _damaged(path, f"topics {ids[info.topic_id]!r} and {info.name!r} have the "
                           f"same id {info.topic_id}")
        topics[info.name], ids[info.topic_id] = info, info.name
    return list(topics.values())


def _topic_of(path: Path, n: int, entry: Any) -> TopicInfo:
    """Entry `n` of the "topics" list as a TopicInfo; ConfigError if any field is wrong."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise _damaged(path, f"topics[{n}] is not an object with a name")
    name = entry["name"]
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise _damaged(path, f"topics[{n}] has an invalid name: {e}") from None
    where = f"topic {name!r}"
    topic_id = _uuid(entry.get("id"))
    if topic_id is None:
        raise _damaged(path, f"{where} has id {entry.get('id')!r}, which is not a topic id "
                       "(a non-zero UUID)")
    partitions = entry.get("partitions")
    if type(partitions) is not int or partitions < 1:
        raise _damaged(path, f"{where} has partition count {partitions!r}, which is not a "
                       "positive integer")
    configs = entry.get("configs", {})
    if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
        raise _damaged(path, f"{where} has configs that are not an object of strings")
    try:
        LogConfig.from_properties(configs)
    except InvalidConfigurationError as e:
        raise _damaged(path, f"{where} has a config that does not parse: {e}") from None
    return TopicInfo(name, topic_id, partitions, dict(configs))


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        parsed = uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return None if parsed == _NIL_ID else parsed


def _damaged(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {problem}; {_WHAT_TO_DO}")


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
