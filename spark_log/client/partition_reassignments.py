"""Partition reassignments asked of a broker (which forwards them to the active controller), as
Kafka's Admin.alterPartitionReassignments and listPartitionReassignments send them:
AlterPartitionReassignments v0 and ListPartitionReassignments v0.

librdkafka has neither API, so this small blocking client sends them with the project's
protocol codecs over `wire.WireClient`. A refusal of the whole request (its top-level error)
raises `WireError`; per-partition errors are returned for the caller to report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey

from .wire import WireClient, WireError

__all__ = ["Ongoing", "PartitionError", "alter_reassignments", "list_reassignments"]

VERSION = 0  # v1 only adds allow_replication_factor_change, whose default (true) is v0's
TIMEOUT_MS = 60_000

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Ongoing:
    """A reassignment in progress: the widened replicas, those being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class PartitionError:
    """Why one partition's reassignment (or cancellation) was refused."""

    code: ErrorCode
    message: str | None

    def __str__(self) -> str:
        name = self.code.name.upper()
        return f"{self.message} ({name})" if self.message else name


def alter_reassignments(client: WireClient,
                        targets: Mapping[TopicPartition, Sequence[int] | None]
                        ) -> dict[TopicPartition, PartitionError]:
    """Start (replicas) or cancel (None) the reassignment of each partition; the partitions
    refused, with why."""
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), replicas in targets.items():
        topics.setdefault(topic, []).append({
            "partition_index": partition,
            "replicas": None if replicas is None else list(replicas)})
    response = client.request(client.bootstrap, ApiKey.ALTER_PARTITION_REASSIGNMENTS, VERSION, {
        "timeout": TIMEOUT_MS,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]})
    _check(response, "altering partition reassignments")
    return {(topic.name, p.partition_index): PartitionError(ErrorCode(p.error_code),
                                                          p.error_message)
            for topic in response.responses for p in topic.partitions
            if p.error_code != ErrorCode.none}


def list_reassignments(client: WireClient, partitions: Iterable[TopicPartition] | None = None
                       ) -> dict[TopicPartition, Ongoing]:
    """The reassignments in progress: all of them, or those of `partitions`."""
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": name, "partition_indexes": sorted(set(ids))}
                  for name, ids in sorted(by_topic.items())]
    response = client.request(client.bootstrap, ApiKey.LIST_PARTITION_REASSIGNMENTS, VERSION,
                              {"timeout": TIMEOUT_MS, "topics": topics})
    _check(response, "listing partition reassignments")
    return {(topic.name, p.partition_index): Ongoing(tuple(p.replicas), tuple(p.adding_replicas),
                                                     tuple(p.removing_replicas))
            for topic in response.topics for p in topic.partitions}


def _check(response: object, what: str) -> None:
    code = ErrorCode(getattr(response, "error_code", ErrorCode.none))
    if code != ErrorCode.none:
        message = getattr(response, "error_message", None)
        raise WireError(code, f"{what}{': ' + message if message else ''}")
