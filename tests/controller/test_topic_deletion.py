"""DeleteTopics as Kafka's ControllerApis and ReplicationControlManager decide it: by name (every
version) and by id (v6), duplicates, unknown topics, a name and id of the same topic, and
delete.topic.enable."""

from __future__ import annotations

from uuid import UUID

import pytest

from spark_log.controller.controller_settings import ControllerSettings
from spark_log.controller.topic_deletion import delete_topics
from spark_log.metadata import ConfigResource, ConfigResourceType
from spark_log.metadata.records import RemoveTopicRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import (
    CLUSTER_ID,
    SETTINGS,
    apply,
    broker,
    image_of,
    request,
    topic,
    topic_config,
    topic_id,
)

ZERO = UUID(int=0)
IMAGE = image_of(broker(1), topic("a", [[1]]), topic("b", [[1]]), topic("c", [[1]]),
                 topic_config("a", "retention.ms", "5"))


def by_name(*names: str, version: int = 5):  # type: ignore[no-untyped-def]
    return request(20, version, topic_names=list(names), timeout=1000)


def by_state(*topics: tuple[str | None, UUID]):  # type: ignore[no-untyped-def]
    return request(20, 6, topics=[{"name": n, "topic_id": i} for n, i in topics], timeout=1000)


def answers(result) -> list[tuple[str | None, UUID | None, int, str | None]]:  # type: ignore[no-untyped-def]
    return [(r.name, getattr(r, "topic_id", None), r.error_code,
             getattr(r, "error_message", None)) for r in result.response.responses]


@pytest.mark.parametrize("version", range(1, 6))
def test_topics_named_are_removed_with_their_configs(version: int) -> None:
    result = delete_topics(IMAGE, by_name("a", "b", version=version), settings=SETTINGS)
    assert result.records == (RemoveTopicRecord(topic_id=topic_id("a")),
                              RemoveTopicRecord(topic_id=topic_id("b")))
    assert [(r.name, r.error_code) for r in result.response.responses] == [("a", 0), ("b", 0)]
    after = apply(IMAGE, result)
    assert set(after.topics_by_name) == {"c"}
    assert ConfigResource(ConfigResourceType.TOPIC, "a") not in after.configs


def test_unknown_and_repeated_names() -> None:
    result = delete_topics(IMAGE, by_name("a", "zz", "b", "b"), settings=SETTINGS)
    assert answers(result) == [
        ("b", None, ErrorCode.invalid_request, "Duplicate topic name."),
        ("zz", None, ErrorCode.unknown_topic_or_partition,
         "This server does not host this topic-partition."),
        ("a", None, ErrorCode.none, None),
    ]
    assert result.records == (RemoveTopicRecord(topic_id=topic_id("a")),)


def test_topics_by_id_and_the_requests_kafka_refuses() -> None:
    unknown = UUID(int=99)
    result = delete_topics(IMAGE, by_state(
        (None, topic_id("a")), (None, ZERO), ("b", topic_id("b")), (None, unknown),
        (None, topic_id("c")), (None, topic_id("c")), ("c", ZERO)), settings=SETTINGS)
    assert answers(result) == [
        (None, ZERO, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        ("b", topic_id("b"), ErrorCode.invalid_request,
         "You may not specify both topic name and topic id."),
        (None, topic_id("c"), ErrorCode.invalid_request, "Duplicate topic id."),
        (None, unknown, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
        ("c", topic_id("c"), ErrorCode.invalid_request,
         "The provided topic name maps to an ID that was already supplied."),
        ("a", topic_id("a"), ErrorCode.none, None),
    ]
    assert result.records == (RemoveTopicRecord(topic_id=topic_id("a")),)


def test_a_name_and_the_id_of_the_same_topic_delete_neither() -> None:
    result = delete_topics(IMAGE, by_state((None, topic_id("a")), ("a", ZERO)),
                           settings=SETTINGS)
    assert result.records == ()
    assert answers(result) == [("a", topic_id("a"), ErrorCode.invalid_request,
                                "The provided topic name maps to an ID that was already "
                                "supplied.")]


@pytest.mark.parametrize(("version", "code", "message"), [
    (2, ErrorCode.invalid_request, None), (5, ErrorCode.topic_deletion_disabled,
                                           "Topic deletion is disabled.")])
def test_deletion_disabled_fails_every_topic(version: int, code: int,
                                             message: str | None) -> None:
    settings = ControllerSettings(cluster_id=CLUSTER_ID, delete_topic_enable=False)
    result = delete_topics(IMAGE, by_name("a", "b", version=version), settings=settings)
    assert result.records == ()
    assert [(r.name, r.error_code, getattr(r, "error_message", None))
            for r in result.response.responses] == [("a", code, message), ("b", code, message)]
