"""Leader elections the active controller makes (Kafka's ReplicationControlManager.electLeaders,
maybeBalancePartitionLeaders and maybeElectUncleanLeaders): ElectLeaders (v0-v2, preferred or
unclean), the periodic preferred-leader rebalance (`auto.leader.rebalance.enable`), and the
periodic unclean election of partitions without a leader whose topic allows it.

The rebalance honours `leader.imbalance.per.broker.percentage` as Kafka's ZooKeeper controller
did: a broker's partitions are rebalanced only when the share of those it should lead (as their
first replica) but does not is above the percentage. (Kafka's KRaft controller rebalances every
partition whose leader is not its first replica, which a percentage of 0 gives here.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from spark_log.metadata import (
    Election,
    MetadataImage,
    MetadataRecord,
    TopicPartition,
    elect_leader,
)
from spark_log.protocol import ErrorCode

from .broker_leadership import Changes
from .controller_result import ApiError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .topic_configs import unclean_leader_election_enabled

__all__ = [
    "PREFERRED",
    "UNCLEAN",
    "balance_partition_leaders",
    "elect_leaders",
    "elect_unclean_leaders",
    "every_partition_fails",
    "imbalanced_partitions",
]

PREFERRED = 0  # ElectLeadersRequest.election_type
UNCLEAN = 1
_ELECTIONS = {PREFERRED: Election.PREFERRED, UNCLEAN: Election.UNCLEAN}
_NONE = ApiError(ErrorCode.none)


def elect_partition(image: MetadataImage, topic: str, partition_id: int, election: Election,
                    changes: Changes) -> ApiError:
    """One partition's election (Kafka's electLeader): its record goes to `changes`."""
    topic_image = image.topic(topic)
    if topic_image is None:
        return ApiError(ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}")
    partition = topic_image.partitions.get(partition_id)
    if partition is None:
        return ApiError(ErrorCode.unknown_topic_or_partition,
                        f"No such partition as {topic}-{partition_id}")
    if ((election is Election.PREFERRED and partition.has_preferred_leader)
            or (election is Election.UNCLEAN and partition.has_leader)):
        return ApiError.of(ErrorCode.election_not_needed)
    result = elect_leader(topic_image.id, partition_id, partition, image.brokers, election)
    if result is None:
        return ApiError.of(ErrorCode.preferred_leader_not_available
                           if election is Election.PREFERRED
                           else ErrorCode.eligible_leaders_not_available)
    changes.add_change(topic, partition_id, result)
    return _NONE


def elect_leaders(image: MetadataImage, request: Any) -> ControllerResult[Any]:
    """An ElectLeaders: a result per partition named (every partition of every topic when the
    request names none, leaving out those that need no election) and the change records."""
    election_type = getattr(request, "election_type", PREFERRED)
    election = _ELECTIONS.get(election_type)
    if election is None:
        return _invalid_election_type(request, election_type)
    changes = Changes()
    results = []
    if request.topic_partitions is None:
        for name in sorted(image.topics_by_name):
            partitions = []
            for partition_id in sorted(image.topics_by_name[name].partitions):
                error = elect_partition(image, name, partition_id, election, changes)
                if error.code != ErrorCode.election_not_needed:
                    partitions.append(_partition_result(partition_id, error))
            results.append({"topic": name, "partition_result": partitions})
    else:
        for topic in request.topic_partitions:
            results.append({"topic": topic.topic, "partition_result": [
                _partition_result(pid, elect_partition(image, topic.topic, pid, election,
                                                       changes))
                for pid in topic.partitions]})
    response = response_for(request, {"error_code": ErrorCode.none,
                                      "replica_election_results": results})
    return ControllerResult(tuple(changes.records), response, False, tuple(changes.unclean))


def _partition_result(partition_id: int, error: ApiError) -> dict[str, Any]:
    return {"partition_id": partition_id, "error_code": error.code,
            "error_message": error.message}


def _invalid_election_type(request: Any, election_type: int) -> ControllerResult[Any]:
    error = ApiError(ErrorCode.invalid_request, f"Unknown election type {election_type}")
    return ControllerResult.of((), every_partition_fails(request, error))


def every_partition_fails(request: Any, error: ApiError) -> Any:
    """Kafka's error response for a whole ElectLeaders: every partition named fails too."""
    results = [{"topic": topic.topic,
                "partition_result": [_partition_result(pid, error) for pid in topic.partitions]}
               for topic in request.topic_partitions or ()]
    return response_for(request, {"error_code": error.code,
                                  "replica_election_results": results})


# ---- periodic elections ---------------------------------------------------------------------

def imbalanced_partitions(image: MetadataImage, percentage: int) -> list[TopicPartition]:
    """Partitions not led by their first replica, of the brokers whose share of such
    partitions (among those they are first replica of) is above `percentage`."""
    preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    imbalanced: dict[int, list[TopicPartition]] = defaultdict(list)
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            if not partition.replicas:
                continue
            first = partition.replicas[0]
            preferred[first].append(TopicPartition(name, partition_id))
            if not partition.has_preferred_leader:
                imbalanced[first].append(TopicPartition(name, partition_id))
    chosen = [partitions for broker, partitions in sorted(imbalanced.items())
              if len(partitions) * 100 > percentage * len(preferred[broker])]
    return sorted(tp for partitions in chosen for tp in partitions)


def balance_partition_leaders(image: MetadataImage, *,
                              settings: ControllerSettings) -> ControllerResult[bool]:
    """The periodic preferred-leader rebalance: preferred elections for the imbalanced
    partitions, at most `max_elections_per_imbalance` records; the response is True when that
    limit was reached (call again once they are appended). Nothing when auto.leader.rebalance
    is off."""
    if not settings.auto_leader_rebalance_enable:
        return ControllerResult.of((), False)
    candidates = imbalanced_partitions(image, settings.leader_imbalance_per_broker_percentage)
    return _elect_some(image, candidates, Election.PREFERRED, settings.max_elections_per_imbalance)


def elect_unclean_leaders(image: MetadataImage, *,
                          settings: ControllerSettings) -> ControllerResult[bool]:
    """The periodic unclean election: partitions without a leader whose topic enables
    unclean.leader.election elect any live replica (possible data loss: the result names
    them). At most `max_elections_per_imbalance` records; True when the limit was reached."""
    leaderless = [TopicPartition(name, partition_id)
                  for name in sorted(image.topics_by_name)
                  if unclean_leader_election_enabled(image, settings, name)
                  for partition_id, partition in sorted(image.topics_by_name[name]
                                                        .partitions.items())
                  if not partition.has_leader]
    return _elect_some(image, leaderless, Election.UNCLEAN, settings.max_elections_per_imbalance)


def _elect_some(image: MetadataImage, partitions: Iterable[TopicPartition], election: Election,
                limit: int) -> ControllerResult[bool]:
    changes = Changes()
    for topic, partition_id in partitions:
        if len(changes.records) >= limit:
            break
        elect_partition(image, topic, partition_id, election, changes)
    records: list[MetadataRecord] = changes.records
    return ControllerResult(tuple(records), len(records) >= limit, False, tuple(changes.unclean))
