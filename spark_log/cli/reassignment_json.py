"""The JSON files of kafka-reassign-partitions.sh and kafka-leader-election.sh, read and written
exactly as Kafka's tools do:

* a reassignment: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],
  "log_dirs":["any","any"]}]}` (`log_dirs` optional; only "any" is supported: this broker has
  one data directory);
* the topics to move (`--generate`): `{"version":1,"topics":[{"topic":"t"}]}`;
* the partitions to elect (`leader-election --path-to-json-file`):
  `{"partitions":[{"topic":"t","partition":0}]}`.

Every problem is a CliError naming the file and what is wrong, on one line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import CliError

__all__ = [
    "ANY_LOG_DIR",
    "Assignment",
    "format_assignment",
    "read_election_partitions",
    "read_reassignment",
    "read_topics_to_move",
]

ANY_LOG_DIR = "any"
VERSION = 1

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, list[int]]


def tp_text(tp: TopicPartition) -> str:
    """`topic-partition`, as Kafka's TopicPartition prints."""
    return f"{tp[0]}-{tp[1]}"


def _load(path: Path, flag: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{flag} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{flag} {path}: cannot read it ({exc})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{flag} {path}: not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise CliError(f"{flag} {path}: expected a JSON object, got {_kind(document)}")
    version = document.get("version", VERSION)
    if version != VERSION:
        raise CliError(f"{flag} {path}: Not supported version field value {version}")
    return document


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entries(document: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    entries = document.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CliError(f"{where}: \"{key}\" must be an array of objects")
    return entries


def _topic(entry: Mapping[str, Any], where: str, index: int) -> str:
    topic = entry.get("topic")
    if not isinstance(topic, str) or not topic:
        raise CliError(f"{where}: entry {index} needs \"topic\", a non-empty string")
    return topic


def _topic_partition(entry: Mapping[str, Any], where: str, index: int) -> TopicPartition:
    topic, partition = _topic(entry, where, index), entry.get("partition")
    if not _is_int(partition) or partition < 0:
        raise CliError(f"{where}: entry {index} needs \"partition\", a non-negative integer")
    return topic, partition


def read_reassignment(path: Path, flag: str = "--reassignment-json-file") -> Assignment:
    """The target replicas of each partition the file names. Refused: no partition, a
    partition named twice, an empty replica list or one naming a broker twice, log_dirs of
    another length than the replicas or naming a directory."""
    where = f"{flag} {path}"
    assignment: Assignment = {}
    seen: list[TopicPartition] = []
    for index, entry in enumerate(_entries(_load(path, flag), "partitions", where)):
        tp = _topic_partition(entry, where, index)
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise CliError(f"{where}: {tp_text(tp)} needs \"replicas\", an array of broker ids")
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise CliError(f"{where}: Size of replicas list {replicas} is different from size "
                           f"of log dirs list {log_dirs} for partition {tp_text(tp)}")
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise CliError(f"{where}: {tp_text(tp)}: moving replicas between log directories "
                           "is not supported (log_dirs must be \"any\")")
        seen.append(tp)
        assignment[tp] = replicas
    _check_assignment(where, seen, assignment)
    return assignment


def _check_assignment(where: str, seen: Sequence[TopicPartition], assignment: Assignment
                      ) -> None:
    if not seen:
        raise CliError(f"{where}: Partition reassignment list cannot be empty")
    _refuse_repeats(where, seen, "Partition reassignment contains duplicate topic partitions")
    empty = sorted(tp for tp, replicas in assignment.items() if not replicas)
    if empty:
        raise CliError(f"{where}: Partition replica list cannot be empty "
                       f"({','.join(tp_text(tp) for tp in empty)})")
    repeated = [f"{tp_text(tp)} contains multiple entries for "
                f"{','.join(str(b) for b, n in sorted(Counter(replicas).items()) if n > 1)}"
                for tp, replicas in sorted(assignment.items())
                if len(set(replicas)) < len(replicas)]
    if repeated:
        raise CliError(f"{where}: Partition replica lists may not contain duplicate entries: "
                       f"{'. '.join(repeated)}")


def read_topics_to_move(path: Path, flag: str = "--topics-to-move-json-file") -> list[str]:
    """The topics the file names (at least one, each once)."""
    where = f"{flag} {path}"
    topics = [_topic(entry, where, index) for index, entry
              in enumerate(_entries(_load(path, flag), "topics", where))]
    if not topics:
        raise CliError(f"{where}: no topic to move")
    _refuse_repeats(where, topics, "List of topics to reassign contains duplicate entries")
    return topics


def read_election_partitions(path: Path, flag: str = "--path-to-json-file"
                             ) -> list[TopicPartition]:
    """The partitions the file names (each once)."""
    where = f"{flag} {path}"
    document = _load(path, flag)
    if "partitions" not in document:
        raise CliError(f"{where}: Replica election data is missing \"partitions\" field")
    partitions = [_topic_partition(entry, where, index) for index, entry
                  in enumerate(_entries(document, "partitions", where))]
    _refuse_repeats(where, partitions, "Replica election data contains duplicate partitions")
    return partitions


def _refuse_repeats(where: str, items: Sequence[str | TopicPartition], what: str) -> None:
    """CliError `what: a,b` naming the items listed more than once."""
    twice = sorted((i for i, n in Counter(items).items() if n > 1), key=str)
    if twice:
        raise CliError(f"{where}: {what}: "
                       f"{','.join(i if isinstance(i, str) else tp_text(i) for i in twice)}")


def format_assignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's reassignment JSON of `assignment`, partitions in order, on one line."""
    partitions = [{"topic": topic, "partition": partition, "replicas": list(replicas),
                   "log_dirs": [ANY_LOG_DIR] * len(replicas)}
                  for (topic, partition), replicas in sorted(assignment.items())]
    return json.dumps({"version": VERSION, "partitions": partitions}, separators=(",", ":"))
