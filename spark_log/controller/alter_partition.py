"""AlterPartition (KIP-497, KIP-841): a partition leader asks the controller to change its ISR
(or to mark it recovered after an unclean election); the change takes effect once committed.

Kafka's checks, in its order, per partition: the partition exists; the request's leader or
partition epoch is not newer than the controller's (else NOT_CONTROLLER — the asker knows more
than this controller, which may be stale); its leader epoch is current (FENCED_LEADER_EPOCH);
the asker leads the partition (INVALID_REQUEST); its partition epoch is current
(INVALID_UPDATE_VERSION); the new ISR is a subset of the replicas without duplicates and holds
the leader (INVALID_REQUEST); a recovering leader's ISR is only itself and a recovered one does
not go back to recovering (INVALID_REQUEST); every new ISR member is registered, unfenced, not
shutting down, and of the broker epoch the asker names (INELIGIBLE_REPLICA). A broker whose own
epoch is stale gets STALE_BROKER_EPOCH for the whole request.

An ISR that comes to hold every target replica of a reassignment in progress completes it (see
`partition_reassignments`); if that moves the leadership away from the asker, it is answered
NEW_LEADER_ELECTED.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_log.metadata import MetadataImage, PartitionRegistration, TopicImage
from spark_log.metadata.partition_change import (
    TargetChange,
    acceptable_leaders,
    build_partition_change,
)
from spark_log.metadata.partition_registration import LeaderRecoveryState
from spark_log.metadata.records import PartitionChangeRecord
from spark_log.protocol import ErrorCode

from .controller_result import ControllerResult, response_for

log = logging.getLogger(__name__)

NO_EPOCH = -1  # v2 names ISR members without their broker epochs


def alter_partition(image: MetadataImage, request: Any) -> ControllerResult[Any]:
    """The records changing each partition's ISR as asked, and the answer per partition."""
    broker = image.brokers.get(request.broker_id)
    if broker is None or (request.broker_epoch != NO_EPOCH and
                          broker.epoch != request.broker_epoch):
        return ControllerResult.of([], response_for(request, {
            "throttle_time": 0, "error_code": ErrorCode.stale_broker_epoch, "topics": []}))
    records: list[PartitionChangeRecord] = []
    topics = []
    for topic in request.topics:  # by id: versions 2 and 3 (0 and 1 named them are gone)
        found = image.topics.get(topic.topic_id)
        topics.append({"topic_id": topic.topic_id, "partitions": [
            _error(p.partition_index, ErrorCode.unknown_topic_id) if found is None
            else _alter(image, request.broker_id, found, p, records)
            for p in topic.partitions]})
    response = response_for(request, {"throttle_time": 0, "error_code": ErrorCode.none,
                                      "topics": topics})
    return ControllerResult.of(records, response)


def _alter(image: MetadataImage, asker: int, topic: TopicImage, data: Any,
           records: list[PartitionChangeRecord]) -> dict[str, Any]:
    partition = topic.partitions.get(data.partition_index)
    if partition is None:
        return _error(data.partition_index, ErrorCode.unknown_topic_or_partition)
    members = _new_isr(data)
    error = _check(image, asker, partition, data, members)
    if error != ErrorCode.none:
        return _error(data.partition_index, error)
    target = TargetChange(isr=tuple(broker_id for broker_id, _ in members),
                          leader_recovery_state=LeaderRecoveryState(data.leader_recovery_state))
    result = build_partition_change(topic.id, data.partition_index, partition,
                                    acceptable_leaders(image.brokers), target)
    if result is not None:
        records.append(result.record)
        was_moving, partition = partition.is_reassigning, partition.merge(result.record)
        if was_moving and not partition.is_reassigning:
            log.info("The ISR change of %s-%d by broker %d completes its reassignment: "
                     "replicas %s", topic.name, data.partition_index, asker,
                     list(partition.replicas))
        if partition.leader != asker:  # only a reassignment may move the leader here
            return _error(data.partition_index, ErrorCode.new_leader_elected)
    return {"partition_index": data.partition_index, "error_code": ErrorCode.none,
            "leader_id": partition.leader, "leader_epoch": partition.leader_epoch,
            "isr": partition.isr, "leader_recovery_state": int(partition.leader_recovery_state),
            "partition_epoch": partition.partition_epoch}


def _new_isr(data: Any) -> list[tuple[int, int]]:
    """(broker id, broker epoch) of each new ISR member; epoch -1 where the version has none."""
    with_epochs = getattr(data, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return [(m.broker_id, m.broker_epoch) for m in with_epochs]
    return [(broker_id, NO_EPOCH) for broker_id in data.new_isr]


def _check(image: MetadataImage, asker: int, partition: PartitionRegistration, data: Any,
           members: list[tuple[int, int]]) -> ErrorCode:
    if data.leader_epoch > partition.leader_epoch or \
            data.partition_epoch > partition.partition_epoch:
        return ErrorCode.not_controller
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if asker != partition.leader:
        return ErrorCode.invalid_request
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.invalid_update_version
    isr = [broker_id for broker_id, _ in members]
    if len(set(isr)) != len(isr) or not set(isr) <= set(partition.replicas) or \
            partition.leader not in isr:
        return ErrorCode.invalid_request
    try:
        recovery = LeaderRecoveryState(data.leader_recovery_state)
    except ValueError:
        return ErrorCode.invalid_request
    if recovery is LeaderRecoveryState.RECOVERING and len(isr) > 1:
        return ErrorCode.invalid_request
    if partition.leader_recovery_state is LeaderRecoveryState.RECOVERED and \
            recovery is LeaderRecoveryState.RECOVERING:
        return ErrorCode.invalid_request
    for broker_id, broker_epoch in members:
        broker = image.brokers.get(broker_id)
        if broker is None or broker.fenced or broker.in_controlled_shutdown or \
                (broker_epoch != NO_EPOCH and broker.epoch != broker_epoch):
            return ErrorCode.ineligible_replica
    return ErrorCode.none


def _error(partition_index: int, code: ErrorCode) -> dict[str, Any]:
    return {"partition_index": partition_index, "error_code": code, "leader_id": -1,
            "leader_epoch": -1, "isr": (), "leader_recovery_state": 0, "partition_epoch": -1}
