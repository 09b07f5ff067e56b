"""`topics.json`: the topics of a data directory — names, ids, partition counts and per-topic
config overrides — and Kafka's rules for topic names, which the file is checked against.

The broker's topic registry (`broker.topics.topic_metadata`) keeps it; `spark-log dump-log
--verify` reads it with the same reader. The file is rewritten atomically on every change. A
file that is there but damaged is a `ConfigError` naming it, the fault and what to do: a topic's
configs cannot be guessed (a `delete` policy guessed for a compacted topic would let retention
delete its data), so the operator restores the file or moves it away.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_log.properties import ConfigError
from spark_log.storage.data_dir.atomic_file import write_atomically
from spark_log.storage.errors import InvalidConfigurationError
from spark_log.storage.log.log_config import LogConfig

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
FILE_NAME = "topics.json"
FORMAT_VERSION = 1
_NIL_ID = uuid.UUID(int=0)
_WHAT_TO_DO = ("the topics' configs cannot be guessed, so restore the file from a backup, or "
               "move it away to have the topics rebuilt from the partition directories with "
               "default configs (each topic's own settings are then lost)")


class InvalidTopicError(ValueError):
    """INVALID_TOPIC_EXCEPTION: a name Kafka would not accept."""


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


def write_topics_file(path: Path, topics: Iterable[TopicInfo]) -> None:
    """Replace `path` with `topics`, sorted by name, atomically."""
    doc = {
        "version": FORMAT_VERSION,
        "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
             "configs": dict(t.configs)}
            for t in sorted(topics, key=lambda t: t.name)
        ],
    }
    write_atomically(path, json.dumps(doc, indent=1).encode())


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
