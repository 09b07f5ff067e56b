"""CreateTopics and CreatePartitions as Kafka's ReplicationControlManager and ControllerApis
decide them: names, duplicates, existing topics, partitions and replication factors (with the
controller's defaults), explicit assignments, configs, validate_only, placement over usable
brokers with injected randomness, and the responses Kafka fills."""

from __future__ import annotations

import random
from uuid import UUID

import pytest

from spark_log.controller.controller_settings import ControllerSettings
from spark_log.controller.replication_control import (
    create_partitions,
    create_topics,
    new_topic_id,
)
from spark_log.metadata import ConfigResource, ConfigResourceType
from spark_log.metadata.records import ConfigRecord, PartitionRecord, TopicRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import (
    CLUSTER_ID,
    SETTINGS,
    apply,
    broker,
    image_of,
    records_of,
    request,
    topic,
)

THREE = image_of(broker(1, rack="a"), broker(2, rack="b"), broker(3, rack="c"))


def creatable(name: str, partitions: int = 1, factor: int = 1, *,
              assignments: list[list[int]] | None = None,
              configs: dict[str, str | None] | None = None) -> dict[str, object]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor,
            "assignments": [{"partition_index": i, "broker_ids": ids}
                            for i, ids in enumerate(assignments or [])],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def create(image, *topics: dict[str, object], version: int = 7,  # type: ignore[no-untyped-def]
           validate_only: bool = False, settings: ControllerSettings = SETTINGS, seed: int = 1):
    req = request(19, version, topics=list(topics), timeout=30000, validate_only=validate_only)
    return create_topics(image, req, settings=settings, random=random.Random(seed))


def error_of(result, name: str) -> tuple[int, str | None]:  # type: ignore[no-untyped-def]
    found = [t for t in result.response.topics if t.name == name]
    assert len(found) == 1
    return found[0].error_code, found[0].error_message


# ---- CreateTopics ---------------------------------------------------------------------------

def test_a_topic_is_its_topic_record_then_a_partition_record_per_partition() -> None:
    result = create(THREE, creatable("events", 3, 2))
    (reply,) = result.response.topics
    assert (reply.error_code, reply.num_partitions, reply.replication_factor) == (0, 3, 2)
    first, *partitions = result.records
    assert first == TopicRecord(name="events", topic_id=reply.topic_id)
    assert [p.partition_id for p in partitions] == [0, 1, 2]
    for partition in partitions:
        assert isinstance(partition, PartitionRecord)
        assert len(set(partition.replicas)) == 2 and partition.isr == partition.replicas
        assert partition.leader == partition.replicas[0]
        assert (partition.leader_epoch, partition.partition_epoch) == (0, 0)
    leaders = {p.leader for p in partitions}
    assert len(leaders) == 3  # striped over the racks
    after = apply(THREE, result)
    assert after.topic("events").id == reply.topic_id


def test_the_response_lists_the_effective_configs_with_their_sources() -> None:
    settings = ControllerSettings(cluster_id=CLUSTER_ID, topic_defaults={"retention.ms": "1000"})
    image = image_of(broker(1), ConfigRecord(resource_type=4, resource_name="",
                                             name="min.insync.replicas", value="1"))
    result = create(image, creatable("t", configs={"cleanup.policy": "compact"}),
                    settings=settings)
    (reply,) = result.response.topics
    configs = {c.name: (c.value, c.config_source) for c in reply.configs}
    assert configs["cleanup.policy"] == ("compact", 1)
    assert configs["min.insync.replicas"] == ("1", 3)
    assert configs["retention.ms"] == ("1000", 4)
    assert configs["segment.bytes"] == (str(1 << 30), 5)
    assert [c.name for c in reply.configs] == sorted(configs)
    topic_record, config_record, partition_record = result.records
    assert isinstance(topic_record, TopicRecord) and isinstance(partition_record, PartitionRecord)
    assert config_record == ConfigRecord(resource_type=2, resource_name="t",
                                         name="cleanup.policy", value="compact")
    after = apply(image, result)
    assert after.configs[ConfigResource(ConfigResourceType.TOPIC, "t")] == {
        "cleanup.policy": "compact"}


def test_minus_one_takes_the_controllers_defaults() -> None:
    settings = ControllerSettings(cluster_id=CLUSTER_ID, num_partitions=4,
                                  default_replication_factor=3)
    (reply,) = create(THREE, creatable("t", -1, -1), settings=settings).response.topics
    assert (reply.num_partitions, reply.replication_factor) == (4, 3)


@pytest.mark.parametrize(("name", "message"), [
    ("", "it can't be empty"), ("..", 'cannot be "." or ".."'), ("a b", "contains a character"),
    ("x" * 250, "longer than 249"),
])
def test_names_kafka_refuses(name: str, message: str) -> None:
    code, text = error_of(create(THREE, creatable(name)), name)
    assert code == ErrorCode.invalid_topic_exception and message in (text or "")


def test_existing_and_colliding_names_are_refused() -> None:
    image = image_of(broker(1), topic("a.b", [[1]]))
    result = create(image, creatable("a.b"), creatable("a_b"), creatable("c"))
    assert error_of(result, "a.b") == (ErrorCode.topic_already_exists,
                                       "Topic 'a.b' already exists.")
    assert error_of(result, "a_b") == (ErrorCode.invalid_topic_exception,
                                       "Topic 'a_b' collides with existing topic: a.b")
    assert error_of(result, "c")[0] == ErrorCode.none
    assert [r.name for r in records_of(result, TopicRecord)] == ["c"]


def test_a_name_twice_and_the_metadata_topic_fail_after_the_others() -> None:
    result = create(THREE, creatable("d"), creatable("__cluster_metadata"), creatable("ok"),
                    creatable("d"))
    names = [(t.name, t.error_code, t.error_message) for t in result.response.topics]
    assert names == [
        ("ok", ErrorCode.none, None),
        ("d", ErrorCode.invalid_request, "Duplicate topic name."),
        ("__cluster_metadata", ErrorCode.invalid_request,
         "Creation of internal topic __cluster_metadata is prohibited."),
    ]
    assert [r.name for r in records_of(result, TopicRecord)] == ["ok"]


@pytest.mark.parametrize(("partitions", "factor", "code", "message"), [
    (1, 0, ErrorCode.invalid_replication_factor,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, -2, ErrorCode.invalid_replication_factor,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (0, 1, ErrorCode.invalid_partitions,
     "Number of partitions was set to an invalid non-positive value."),
    (1, 4, ErrorCode.invalid_replication_factor,
     "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot "
     "be reached because only 3 broker(s) are registered."),
])
def test_partition_counts_and_replication_factors(partitions: int, factor: int, code: int,
                                                  message: str) -> None:
    assert error_of(create(THREE, creatable("t", partitions, factor)), "t") == (code, message)


def test_no_unfenced_broker_means_no_topic() -> None:
    image = image_of(broker(1, fenced=True), broker(2, in_controlled_shutdown=True))
    assert error_of(create(image, creatable("t")), "t") == (
        ErrorCode.invalid_replication_factor,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.")


def test_fenced_brokers_only_follow_when_there_are_too_few_unfenced_ones() -> None:
    image = image_of(broker(1), broker(2, fenced=True))
    result = create(image, creatable("t", 4, 2))
    for partition in records_of(result, PartitionRecord):
        assert partition.leader == 1 and partition.isr == (1,)
        assert set(partition.replicas) == {1, 2}


@pytest.mark.parametrize(("configs", "message"), [
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms"),
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"segment.bytes": None, "retention.ms": None},
     "Null value not supported for topic configs: segment.bytes,retention.ms"),
])
def test_configs_are_checked(configs: dict[str, str | None], message: str) -> None:
    code, text = error_of(create(THREE, creatable("t", configs=configs)), "t")
    assert code == ErrorCode.invalid_config and message in (text or "")


def test_explicit_assignments() -> None:
    image = image_of(broker(1), broker(2), broker(3, fenced=True))
    result = create(image, creatable("t", -1, -1, assignments=[[3, 1], [2, 3]]))
    (reply,) = result.response.topics
    assert (reply.error_code, reply.num_partitions, reply.replication_factor) == (0, 2, 2)
    first, second = records_of(result, PartitionRecord)
    assert (first.replicas, first.isr, first.leader) == ((3, 1), (1,), 1)
    assert (second.replicas, second.isr, second.leader) == ((2, 3), (2,), 2)


@pytest.mark.parametrize(("partitions", "factor", "assignments", "code", "message"), [
    (-1, 2, [[1]], ErrorCode.invalid_request, "A manual partition assignment was specified, "
                                              "but replication factor was not set to -1."),
    (2, -1, [[1]], ErrorCode.invalid_request, "A manual partition assignment was specified, "
                                              "but numPartitions was not set to -1."),
    (-1, -1, [[1], [9]], ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    (-1, -1, [[1, 1]], ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes the broker 1 more than once."),
    (-1, -1, [[1], [1, 2]], ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes a partition with 2 replica(s), but this is not "
     "consistent with previous partitions, which have 1 replica(s)."),
    (-1, -1, [[3]], ErrorCode.invalid_replica_assignment,
     "All brokers specified in the manual partition assignment for partition 0 are fenced or "
     "in controlled shutdown."),
])
def test_explicit_assignments_kafka_refuses(partitions: int, factor: int,
                                            assignments: list[list[int]], code: int,
                                            message: str) -> None:
    image = image_of(broker(1), broker(2), broker(3, fenced=True))
    result = create(image, creatable("t", partitions, factor, assignments=assignments))
    assert error_of(result, "t") == (code, message)
    assert result.records == ()


def test_assignments_must_number_partitions_from_zero_once_each() -> None:
    image = image_of(broker(1))
    for indexes, message in (([0, 0], "Found multiple manual partition assignments for "
                                      "partition 0"),
                             ([0, 2], "partitions should be a consecutive 0-based integer "
                                      "sequence")):
        topic_entry = creatable("t", -1, -1)
        topic_entry["assignments"] = [{"partition_index": i, "broker_ids": [1]} for i in indexes]
        assert error_of(create(image, topic_entry), "t") == (
            ErrorCode.invalid_replica_assignment, message)


@pytest.mark.parametrize("version", range(2, 8))
def test_validate_only_answers_without_records_at_every_version(version: int) -> None:
    result = create(THREE, creatable("t", 2, 3), version=version, validate_only=True)
    assert result.records == ()
    (reply,) = result.response.topics
    assert reply.error_code == ErrorCode.none
    if version >= 5:
        assert (reply.num_partitions, reply.replication_factor) == (2, 3)


def test_failed_topics_answer_kafkas_defaults() -> None:
    (reply,) = create(THREE, creatable("t", 0)).response.topics
    assert (reply.topic_id, reply.num_partitions, reply.replication_factor, reply.configs) == (
        UUID(int=0), -1, -1, ())


def test_topic_ids_are_random_version_4_and_never_reserved() -> None:
    rng = random.Random(7)
    ids = {new_topic_id(rng) for _ in range(500)}
    assert len(ids) == 500
    for topic_id in ids:
        assert topic_id.version == 4 and topic_id.bytes[0] >> 2 != 62
        assert topic_id not in (UUID(int=0), UUID(int=1))

    class Fixed:
        """Draws a '-'-prefixed id, then one already taken, then a free one."""

        def __init__(self) -> None:
            self.values = [0xF8 << 120, 6 << 64, 5 << 64]

        def getrandbits(self, k: int) -> int:
            return self.values.pop(0)

        def randrange(self, stop: int) -> int:
            return 0

    def v4(bits: int) -> UUID:
        return UUID(int=bits | 4 << 76 | 2 << 62)

    assert new_topic_id(Fixed(), taken=[v4(6 << 64)]) == v4(5 << 64)


# ---- CreatePartitions -----------------------------------------------------------------------

def grow(image, *topics: tuple[str, int, list[list[int]] | None],  # type: ignore[no-untyped-def]
         validate_only: bool = False, version: int = 3):
    entries = [{"name": name, "count": count,
                "assignments": None if assignments is None else
                [{"broker_ids": ids} for ids in assignments]}
               for name, count, assignments in topics]
    req = request(37, version, topics=entries, timeout=30000, validate_only=validate_only)
    return create_partitions(image, req, random=random.Random(3))


def grown(result) -> list[tuple[str, int, str | None]]:  # type: ignore[no-untyped-def]
    return [(r.name, r.error_code, r.error_message) for r in result.response.results]


def test_new_partitions_follow_the_last_with_the_topics_replication_factor() -> None:
    image = image_of(broker(1), broker(2), broker(3), topic("t", [[1, 2]]))
    result = grow(image, ("t", 3, None))
    assert grown(result) == [("t", ErrorCode.none, None)]
    new = records_of(result, PartitionRecord)
    assert [p.partition_id for p in new] == [1, 2]
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in new)
    assert len(apply(image, result).topic("t").partitions) == 3
    assert grow(image, ("t", 3, None), validate_only=True).records == ()


def test_explicit_new_partitions() -> None:
    image = image_of(broker(1), broker(2), topic("t", [[1, 2]]))
    result = grow(image, ("t", 2, [[2, 1]]))
    (partition,) = records_of(result, PartitionRecord)
    assert (partition.partition_id, partition.replicas, partition.leader) == (1, (2, 1), 2)


@pytest.mark.parametrize(("count", "assignments", "code", "message"), [
    (1, None, ErrorCode.invalid_partitions, "Topic already has 1 partition(s)."),
    (0, None, ErrorCode.invalid_partitions,
     "The topic t currently has 1 partition(s); 0 would not be an increase."),
    (3, [[1, 2]], ErrorCode.invalid_replica_assignment,
     "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    (2, [[1]], ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes a partition with 1 replica(s), but this is not "
     "consistent with previous partitions, which have 2 replica(s)."),
    (2, [[1, 7]], ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes broker 7, but no such broker is registered."),
])
def test_new_partitions_kafka_refuses(count: int, assignments: list[list[int]] | None,
                                      code: int, message: str) -> None:
    image = image_of(broker(1), broker(2), topic("t", [[1, 2]]))
    result = grow(image, ("t", count, assignments))
    assert grown(result) == [("t", code, message)] and result.records == ()


def test_unknown_and_repeated_topics() -> None:
    image = image_of(broker(1), topic("t", [[1]]), topic("u", [[1]]))
    result = grow(image, ("nope", 2, None), ("t", 2, None), ("u", 2, None), ("t", 3, None))
    assert grown(result) == [
        ("t", ErrorCode.invalid_request, "Duplicate topic name."),
        ("nope", ErrorCode.unknown_topic_or_partition, None),
        ("u", ErrorCode.none, None),
    ]


def test_new_partitions_need_enough_brokers() -> None:
    image = image_of(broker(1), topic("t", [[1, 2]], isr=[[1]]))
    result = grow(image, ("t", 2, None))
    assert grown(result) == [("t", ErrorCode.invalid_replication_factor,
                              "The target replication factor of 2 cannot be reached because "
                              "only 1 broker(s) are registered.")]


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_internal_topics_keep_their_partition_count(internal: str) -> None:
    image = image_of(broker(1), topic(internal, [[1]]), topic("t", [[1]]))
    for validate_only in (False, True):
        result = grow(image, (internal, 2, None), ("t", 2, None), validate_only=validate_only)
        assert grown(result) == [
            (internal, ErrorCode.invalid_topic_exception,
             f"The number of partitions of the internal topic {internal} cannot be changed: "
             "coordinators map ids onto its partitions by that number."),
            ("t", ErrorCode.none, None)]
        assert all(p.topic_id == image.topic("t").id for p in records_of(result, PartitionRecord))


TOO_MANY = "Excessively large number of partitions per request."


def test_a_request_for_more_than_ten_thousand_partitions_is_refused_whole() -> None:
    at_limit = create(THREE, creatable("a", 5000), creatable("b", 5000))
    assert len(records_of(at_limit, PartitionRecord)) == 10_000
    over = create(THREE, creatable("a", 5000), creatable("b", 5000),
                  creatable("c", -1))  # the default num.partitions (1) counts too
    assert over.records == ()
    for name in "abc":
        assert error_of(over, name) == (ErrorCode.policy_violation, TOO_MANY)
    huge = create(THREE, creatable("fuzzed", 2_000_000_000))  # answered at once, not placed
    assert error_of(huge, "fuzzed") == (ErrorCode.policy_violation, TOO_MANY)


def test_more_than_ten_thousand_new_partitions_are_refused() -> None:
    image = image_of(broker(1), topic("t", [[1]]))
    assert len(records_of(grow(image, ("t", 10_001, None)), PartitionRecord)) == 10_000
    refused = grow(image, ("t", 2_000_000_000, None))
    assert grown(refused) == [("t", ErrorCode.policy_violation, TOO_MANY)]
