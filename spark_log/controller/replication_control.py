"""Topics and partitions as the active controller creates them (Kafka's
ReplicationControlManager.createTopics and createPartitions, with the request checks of Kafka's
ControllerApis): CreateTopics (v2-v7) and CreatePartitions (v0-v3).

Each topic succeeds or fails on its own, with Kafka's error code and message; the records of
the topics that succeed are appended together (nothing with validate_only). A new topic is its
TopicRecord, then its ConfigRecords, then a PartitionRecord per partition; replicas are placed
over the usable brokers (registered, not shutting down) by `metadata.replica_placement`, the
ISR is the active replicas and the first of them leads. Randomness (placement, topic ids) is
injected: `random.Random` fits.

Deletion is `topic_deletion`; elections are `leader_election`; ISR changes sent by partition
leaders are `alter_partition`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol
from uuid import UUID

from spark_log.metadata import (
    MetadataImage,
    MetadataRecord,
    PartitionRegistration,
    PlacementError,
    new_partition,
    place_replicas,
    usable_brokers,
    validate_manual_assignment,
)
from spark_log.metadata.metadata_topic import METADATA_TOPIC
from spark_log.metadata.records import ZERO_UUID, ConfigRecord, TopicRecord
from spark_log.protocol import ErrorCode
from spark_log.storage.data_dir.topics_file import (
    INTERNAL_TOPICS,
    InvalidTopicError,
    collision_key,
    validate_topic_name,
)

from .controller_result import ControllerError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .topic_configs import effective_topic_configs, validate_topic_configs

__all__ = ["CLUSTER_METADATA_TOPIC", "Random", "create_partitions", "create_topics",
           "new_topic_id"]

CLUSTER_METADATA_TOPIC = METADATA_TOPIC
_METADATA_TOPIC_ID = UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID, never handed out
_TOPIC = 2  # ConfigResourceType.TOPIC


class Random(Protocol):
    """The randomness decisions need: `random.Random` fits."""

    def randrange(self, stop: int) -> int: ...

    def getrandbits(self, k: int) -> int: ...


def new_topic_id(random: Random, taken: Iterable[UUID] = ()) -> UUID:
    """A random (version 4) topic id as Kafka's Uuid.randomUuid picks one: never the zero or
    metadata topic id, never one whose base64 form starts with '-', nor one in `taken`."""
    used = set(taken)
    while True:
        bits = random.getrandbits(128)
        bits = (bits & ~(0xF << 76)) | (4 << 76)  # version 4
        bits = (bits & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
        topic_id = UUID(int=bits)
        if topic_id not in (ZERO_UUID, _METADATA_TOPIC_ID) and topic_id.bytes[0] >> 2 != 62 \
                and topic_id not in used:
            return topic_id


# ---- CreateTopics ---------------------------------------------------------------------------

# Kafka's MAX_PARTITIONS_PER_BATCH: what one request may create. Placing and writing more at once
# would hold the controller (and its event loop) for minutes and its records would not fit a
# batch; Kafka refuses such a request whole.
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def create_topics(image: MetadataImage, request: Any, *, settings: ControllerSettings,
                  random: Random) -> ControllerResult[Any]:
    """A CreateTopics: per topic, the records creating it and its result. A name given twice
    and `__cluster_metadata` fail with INVALID_REQUEST (listed after the others, as Kafka's
    ControllerApis adds them)."""
    counts = Counter(topic.name for topic in request.topics)
    if _requested_partitions(request, settings.num_partitions) > MAX_PARTITIONS_PER_REQUEST:
        refused = ControllerError(ErrorCode.policy_violation, _TOO_MANY_PARTITIONS)
        return ControllerResult.of([], response_for(request, {"topics": [
            _topic_failure(name, refused) for name in counts]}))
    results: list[dict[str, Any]] = []
    records: list[MetadataRecord] = []
    taken = set(image.topics)
    for topic in request.topics:
        if counts[topic.name] > 1 or topic.name == CLUSTER_METADATA_TOPIC:
            continue
        try:
            result, topic_records = _create_topic(image, topic, settings, random, taken)
        except ControllerError as exc:
            result, topic_records = _topic_failure(topic.name, exc), []
        results.append(result)
        records.extend(topic_records)
    for name in dict.fromkeys(name for name, count in counts.items() if count > 1):
        results.append(_topic_failure(name, ControllerError(ErrorCode.invalid_request,
                                                            "Duplicate topic name.")))
    if counts.get(CLUSTER_METADATA_TOPIC) == 1:
        results.append(_topic_failure(CLUSTER_METADATA_TOPIC, ControllerError(
            ErrorCode.invalid_request,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")))
    result = ControllerResult.of(records, response_for(request, {"topics": results}))
    return result.without_records() if request.validate_only else result


def _requested_partitions(request: Any, default: int) -> int:
    """An upper bound of the partitions a CreateTopics asks for (Kafka counts the same)."""
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _topic_failure(name: str, exc: ControllerError) -> dict[str, Any]:
    error = exc.api_error
    return {"name": name, "topic_id": ZERO_UUID, "error_code": error.code,
            "error_message": error.message, "num_partitions": -1, "replication_factor": -1,
            "configs": ()}


def _create_topic(image: MetadataImage, topic: Any, settings: ControllerSettings,
                  random: Random, taken: set[UUID]) -> tuple[dict[str, Any], list[MetadataRecord]]:
    """The result and records of one new topic; ControllerError if it is refused."""
    _check_new_name(image, topic.name)
    configs = _creation_configs(topic.configs)
    if configs:
        validate_topic_configs(configs, settings)
    if topic.assignments:
        partitions = _assigned_partitions(image, topic)
    else:
        partitions = _placed_partitions(image, topic, settings, random)
    topic_id = new_topic_id(random, taken)
    taken.add(topic_id)
    records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
    records.extend(ConfigRecord(resource_type=_TOPIC, resource_name=topic.name, name=key,
                                value=value) for key, value in configs.items())
    records.extend(partition.to_record(topic_id, index)
                   for index, partition in enumerate(partitions))
    result = {"name": topic.name, "topic_id": topic_id, "error_code": ErrorCode.none,
              "error_message": None, "topic_config_error_code": ErrorCode.none,
              "num_partitions": len(partitions),
              "replication_factor": len(partitions[0].replicas),
              "configs": effective_topic_configs(image, settings, configs)}
    return result, records


def _check_new_name(image: MetadataImage, name: str) -> None:
    if image.topic(name) is not None:
        raise ControllerError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise ControllerError(ErrorCode.invalid_topic_exception, str(exc)) from None
    if "." in name or "_" in name:
        key = collision_key(name)
        clash = next((existing for existing in sorted(image.topics_by_name)
                      if collision_key(existing) == key), None)
        if clash is not None:
            raise ControllerError(ErrorCode.invalid_topic_exception,
                                  f"Topic '{name}' collides with existing topic: {clash}")


def _creation_configs(configs: Sequence[Any]) -> dict[str, str]:
    """The configs a CreateTopics names (the last value of a name repeated wins)."""
    nulls = [config.name for config in configs if config.value is None]
    if nulls:
        raise ControllerError(ErrorCode.invalid_config, "Null value not supported for topic "
                                                        f"configs: {','.join(nulls)}")
    return {config.name: config.value for config in configs}


def _assigned_partitions(image: MetadataImage, topic: Any) -> list[PartitionRegistration]:
    """The partitions of an explicit assignment, checked as Kafka checks them."""
    if topic.replication_factor != -1:
        raise ControllerError(ErrorCode.invalid_request, "A manual partition assignment was "
                              "specified, but replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise ControllerError(ErrorCode.invalid_request, "A manual partition assignment was "
                              "specified, but numPartitions was not set to -1.")
    partitions: dict[int, PartitionRegistration] = {}
    factor: int | None = None
    for assignment in topic.assignments:
        index = assignment.partition_index
        if index in partitions:
            raise ControllerError(ErrorCode.invalid_replica_assignment, "Found multiple manual "
                                  f"partition assignments for partition {index}")
        partitions[index] = _assigned_partition(image, assignment.broker_ids, factor, index)
        factor = len(assignment.broker_ids)
    if sorted(partitions) != list(range(len(partitions))):
        raise ControllerError(ErrorCode.invalid_replica_assignment,
                              "partitions should be a consecutive 0-based integer sequence")
    return [partitions[index] for index in range(len(partitions))]


def _assigned_partition(image: MetadataImage, replicas: Sequence[int], factor: int | None,
                        index: int) -> PartitionRegistration:
    try:
        validate_manual_assignment(replicas, image.brokers, factor)
    except PlacementError as exc:
        raise ControllerError(exc.error_code, str(exc)) from None
    partition = new_partition(replicas, image.brokers)
    if partition is None:
        raise ControllerError(ErrorCode.invalid_replica_assignment, "All brokers specified in "
                              f"the manual partition assignment for partition {index} are "
                              "fenced or in controlled shutdown.")
    return partition


def _placed_partitions(image: MetadataImage, topic: Any, settings: ControllerSettings,
                       random: Random) -> list[PartitionRegistration]:
    factor, count = topic.replication_factor, topic.num_partitions
    if factor < -1 or factor == 0:
        raise ControllerError(ErrorCode.invalid_replication_factor, "Replication factor must be "
                              "larger than 0, or -1 to use the default value.")
    if count < -1 or count == 0:
        raise ControllerError(ErrorCode.invalid_partitions, "Number of partitions was set to an "
                              "invalid non-positive value.")
    factor = settings.default_replication_factor if factor == -1 else factor
    count = settings.num_partitions if count == -1 else count
    prefix = f"Unable to replicate the partition {factor} time(s): "
    try:
        assignments = place_replicas(usable_brokers(image.brokers), count, factor,
                                     random.randrange)
    except PlacementError as exc:
        raise ControllerError(ErrorCode.invalid_replication_factor, prefix + str(exc)) from None
    return _active_partitions(image, assignments, prefix)


def _active_partitions(image: MetadataImage, assignments: Iterable[Sequence[int]],
                       prefix: str) -> list[PartitionRegistration]:
    """New partitions on placed replicas; INVALID_REPLICATION_FACTOR if one has no active
    replica (every usable broker fenced or shutting down)."""
    partitions = []
    for replicas in assignments:
        partition = new_partition(replicas, image.brokers)
        if partition is None:
            raise ControllerError(ErrorCode.invalid_replication_factor, prefix + "All brokers "
                                  "are currently fenced or in controlled shutdown.")
        partitions.append(partition)
    return partitions


# ---- CreatePartitions -----------------------------------------------------------------------

def create_partitions(image: MetadataImage, request: Any, *,
                      random: Random) -> ControllerResult[Any]:
    """A CreatePartitions: per topic, the PartitionRecords of its new partitions and its
    result; a topic named twice fails with INVALID_REQUEST (listed first, as Kafka's
    ControllerApis adds it)."""
    counts = Counter(topic.name for topic in request.topics)
    results: list[dict[str, Any]] = [
        {"name": name, "error_code": ErrorCode.invalid_request,
         "error_message": "Duplicate topic name."}
        for name in dict.fromkeys(name for name, count in counts.items() if count > 1)]
    records: list[MetadataRecord] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        try:
            records.extend(_new_partitions(image, topic, random))
            results.append({"name": topic.name, "error_code": ErrorCode.none,
                            "error_message": None})
        except ControllerError as exc:
            error = exc.api_error
            results.append({"name": topic.name, "error_code": error.code,
                            "error_message": error.message})
    result = ControllerResult.of(records, response_for(request, {"results": results}))
    return result.without_records() if request.validate_only else result


def _new_partitions(image: MetadataImage, request: Any, random: Random) -> list[MetadataRecord]:
    topic = image.topic(request.name)
    if topic is None:
        raise ControllerError(ErrorCode.unknown_topic_or_partition)
    if topic.name in INTERNAL_TOPICS:
        # Coordinators hash a group or transactional id onto these topics' partition count:
        # a new count would move ids away from the partitions holding their state. Kafka's
        # controller accepts this (only its old topic tool refused); here it is refused, with
        # the code Kafka answers when it refuses an operation on an internal topic.
        raise ControllerError(ErrorCode.invalid_topic_exception,
                              f"The number of partitions of the internal topic {topic.name} "
                              "cannot be changed: coordinators map ids onto its partitions by "
                              "that number.")
    current = len(topic.partitions)
    if request.count == current:
        raise ControllerError(ErrorCode.invalid_partitions,
                              f"Topic already has {current} partition(s).")
    if request.count < current:
        raise ControllerError(ErrorCode.invalid_partitions, f"The topic {request.name} currently "
                              f"has {current} partition(s); {request.count} would not be an "
                              "increase.")
    additional = request.count - current
    if additional > MAX_PARTITIONS_PER_REQUEST:
        raise ControllerError(ErrorCode.policy_violation, _TOO_MANY_PARTITIONS)
    if request.assignments is not None and len(request.assignments) != additional:
        raise ControllerError(ErrorCode.invalid_replica_assignment, f"Attempted to add "
                              f"{additional} additional partition(s), but only "
                              f"{len(request.assignments)} assignment(s) were specified.")
    factor = len(topic.partitions[min(topic.partitions)].replicas)
    if request.assignments is not None:
        partitions = [_assigned_partition(image, assignment.broker_ids, factor, current + i)
                      for i, assignment in enumerate(request.assignments)]
    else:
        partitions = _placed_new_partitions(image, additional, factor, random)
    return [partition.to_record(topic.id, current + i) for i, partition in enumerate(partitions)]


def _placed_new_partitions(image: MetadataImage, count: int, factor: int,
                           random: Random) -> list[PartitionRegistration]:
    try:
        assignments = place_replicas(usable_brokers(image.brokers), count, factor,
                                     random.randrange)
    except PlacementError as exc:
        raise ControllerError(ErrorCode.invalid_replication_factor, str(exc)) from None
    return _active_partitions(image, assignments,
                              f"Unable to replicate the partition {factor} time(s): ")
