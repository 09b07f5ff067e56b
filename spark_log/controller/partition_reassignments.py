"""Partition reassignment as the active controller runs it (KIP-455; Kafka's
ReplicationControlManager.alterPartitionReassignments and listPartitionReassignments):
AlterPartitionReassignments (v0-v1) starts, replaces or cancels moves, ListPartitionReassignments
(v0) lists the moves in progress.

A target replica list widens the partition to target + removed replicas, marking the replicas
being added and removed (see `metadata.reassignment`); the move completes — replicas = target,
ISR without the removed ones, a new leader if the leader was removed — as soon as the ISR holds
every target replica: at once when it already does, else on the AlterPartition that brings the
last one in (`alter_partition`). Null replicas cancel a move. Each partition succeeds or fails on
its own; the records of those that succeed are appended together.

Refusals: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; an empty target, a broker
named twice, an unregistered or fenced broker is INVALID_REPLICA_ASSIGNMENT (Kafka accepts a
fenced broker; a move onto one could not complete until it returns, so it is refused up front);
with v1's allow_replication_factor_change false, a target of another size than the partition's
replicas is INVALID_REPLICATION_FACTOR (KIP-860); cancelling where no move is in progress is
NO_REASSIGNMENT_IN_PROGRESS, and a cancel that would need an unclean election the topic does
not allow is INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from spark_log.metadata import (
    MetadataImage,
    PartitionChangeResult,
    PartitionRegistration,
    PlacementError,
    TopicPartition,
    cancel_reassignment,
    reassign,
)
from spark_log.protocol import ErrorCode

from .broker_leadership import Changes
from .controller_result import ApiError, ControllerError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .topic_configs import unclean_leader_election_enabled

__all__ = ["alter_partition_reassignments", "every_reassignment_fails",
           "list_partition_reassignments"]

log = logging.getLogger(__name__)

_NONE = ApiError(ErrorCode.none)


def alter_partition_reassignments(image: MetadataImage, request: Any, *,
                                  settings: ControllerSettings) -> ControllerResult[Any]:
    """An AlterPartitionReassignments: the change records of the partitions that succeed, and
    a result per partition named."""
    changes = Changes()
    # A partition named twice sees the first change: each record applies to the one before.
    changed: dict[TopicPartition, PartitionRegistration] = {}
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    responses, succeeded, total = [], 0, 0
    for topic in request.topics:
        partitions = []
        for entry in topic.partitions:
            total += 1
            try:
                _alter(image, settings, topic.name, entry.partition_index, entry.replicas,
                       allow_rf_change, changes, changed)
                error = _NONE
                succeeded += 1
            except ControllerError as exc:
                error = exc.api_error
                log.info("Unable to alter the reassignment of %s-%d: %s", topic.name,
                         entry.partition_index, exc)
            partitions.append({"partition_index": entry.partition_index,
                               "error_code": error.code, "error_message": error.message})
        responses.append({"name": topic.name, "partitions": partitions})
    if total:
        log.info("Altered %d of %d partition reassignment(s)", succeeded, total)
    response = response_for(request, {"error_code": ErrorCode.none, "error_message": None,
                                      "responses": responses})
    return ControllerResult.of(changes.records, response, changes.unclean)


def _alter(image: MetadataImage, settings: ControllerSettings, topic: str, partition_id: int,
           replicas: Sequence[int] | None, allow_rf_change: bool, changes: Changes,
           changed: dict[TopicPartition, PartitionRegistration]) -> None:
    topic_image = image.topic(topic)
    if topic_image is None:
        raise ControllerError(ErrorCode.unknown_topic_or_partition,
                              f"Unable to find a topic named {topic}.")
    key = TopicPartition(topic, partition_id)
    partition = changed.get(key) or topic_image.partitions.get(partition_id)
    if partition is None:
        raise ControllerError(ErrorCode.unknown_topic_or_partition,
                              f"Unable to find partition {topic}:{partition_id}.")
    try:
        if replicas is None:
            result = cancel_reassignment(
                topic_image.id, partition_id, partition, image.brokers,
                unclean_leader_election_enabled(image, settings, topic))
        else:
            _check_target(image, topic, partition_id, partition, replicas, allow_rf_change)
            result = reassign(topic_image.id, partition_id, partition, replicas, image.brokers)
    except PlacementError as exc:
        raise ControllerError(exc.error_code, str(exc)) from None
    _record(topic, partition_id, partition, result, changes, changed)


def _check_target(image: MetadataImage, topic: str, partition_id: int,
                  partition: PartitionRegistration, replicas: Sequence[int],
                  allow_rf_change: bool) -> None:
    """What `metadata.reassign` leaves to the controller: fenced targets, and the replication
    factor when the request may not change it (after the checks of the list itself)."""
    for broker_id in sorted(set(replicas)):
        broker = image.brokers.get(broker_id)
        if broker is not None and broker.fenced:
            raise ControllerError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, which is fenced.")
    current = [r for r in partition.replicas if r not in partition.adding_replicas]
    if not allow_rf_change and replicas and len(set(replicas)) == len(replicas) \
            and len(replicas) != len(current):
        raise ControllerError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor of {topic}-{partition_id} would change from "
            f"{len(current)} to {len(replicas)}, which the request does not allow.")


def _record(topic: str, partition_id: int, partition: PartitionRegistration,
            result: PartitionChangeResult | None, changes: Changes,
            changed: dict[TopicPartition, PartitionRegistration]) -> None:
    if result is None:
        return
    changes.add_change(topic, partition_id, result)
    after = partition.merge(result.record)
    changed[TopicPartition(topic, partition_id)] = after
    log.info("Partition %s-%d now has replicas %s%s", topic, partition_id, list(after.replicas),
             f", adding {list(after.adding_replicas)}, removing {list(after.removing_replicas)}"
             if after.is_reassigning else " (no reassignment in progress)")


def every_reassignment_fails(request: Any, error: ApiError) -> Any:
    """Kafka's error response for a whole AlterPartitionReassignments: the top-level error and
    every partition named."""
    return response_for(request, {
        "error_code": error.code, "error_message": error.message,
        "responses": [{"name": topic.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": error.code,
             "error_message": error.message} for p in topic.partitions]}
            for topic in request.topics]})


# ---- ListPartitionReassignments --------------------------------------------------------------

def list_partition_reassignments(image: MetadataImage, request: Any) -> ControllerResult[Any]:
    """The moves in progress: of every partition (topics null), else of the partitions named
    (unknown topics and partitions, and those not moving, are left out)."""
    if request.topics is None:
        wanted = [(name, sorted(image.topics_by_name[name].partitions))
                  for name in sorted(image.topics_by_name)]
    else:
        wanted = [(topic.name, list(topic.partition_indexes)) for topic in request.topics]
    topics = []
    for name, partition_ids in wanted:
        topic_image = image.topic(name)
        if topic_image is None:
            continue
        ongoing = [_ongoing(partition_id, partition) for partition_id in partition_ids
                   if (partition := topic_image.partitions.get(partition_id)) is not None
                   and partition.is_reassigning]
        if ongoing:
            topics.append({"name": name, "partitions": ongoing})
    return ControllerResult.of((), response_for(request, {
        "error_code": ErrorCode.none, "error_message": None, "topics": topics}))


def _ongoing(partition_id: int, partition: PartitionRegistration) -> dict[str, Any]:
    return {"partition_index": partition_id, "replicas": partition.replicas,
            "adding_replicas": partition.adding_replicas,
            "removing_replicas": partition.removing_replicas}
