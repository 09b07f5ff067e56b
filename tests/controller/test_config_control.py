"""IncrementalAlterConfigs and AlterConfigs as Kafka's ConfigurationControlManager, its
validator and existence check decide them, for topic and broker resources."""

from __future__ import annotations

import pytest

from spark_log.controller.config_control import (
    AlterConfigOp,
    alter_configs,
    incremental_alter_configs,
)
from spark_log.metadata import ConfigResource, ConfigResourceType
from spark_log.metadata.records import ConfigRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import SETTINGS, apply, broker, image_of, request, topic, topic_config

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = (int(op) for op in AlterConfigOp)
IMAGE = image_of(broker(1), topic("t", [[1]]), topic_config("t", "retention.ms", "100"),
                 topic_config("t", "cleanup.policy", "delete"))


def incremental(*resources: tuple[int, str, list[tuple[str, int, str | None]]],  # type: ignore[no-untyped-def]
                validate_only: bool = False, image=IMAGE, version: int = 1):
    entries = [{"resource_type": kind, "resource_name": name,
                "configs": [{"name": k, "config_operation": op, "value": v}
                            for k, op, v in configs]}
               for kind, name, configs in resources]
    req = request(44, version, resources=entries, validate_only=validate_only)
    return incremental_alter_configs(image, req, settings=SETTINGS)


def legacy(*resources: tuple[int, str, dict[str, str | None]],  # type: ignore[no-untyped-def]
           validate_only: bool = False, image=IMAGE, version: int = 2):
    entries = [{"resource_type": kind, "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()]}
               for kind, name, configs in resources]
    req = request(33, version, resources=entries, validate_only=validate_only)
    return alter_configs(image, req, settings=SETTINGS)


def answers(result) -> list[tuple[int, str, int, str | None]]:  # type: ignore[no-untyped-def]
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message)
            for r in result.response.responses]


def topic_configs(image) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return dict(image.configs.get(ConfigResource(ConfigResourceType.TOPIC, "t"), {}))


@pytest.mark.parametrize("version", [0, 1])
def test_set_delete_append_and_subtract(version: int) -> None:
    result = incremental((TOPIC, "t", [("retention.ms", SET, "200"), ("segment.ms", SET, "5000"),
                                       ("cleanup.policy", APPEND, "compact")]),
                         version=version)
    assert answers(result) == [(TOPIC, "t", ErrorCode.none, None)]
    image = apply(IMAGE, result)
    assert topic_configs(image) == {
        "retention.ms": "200", "segment.ms": "5000", "cleanup.policy": "delete,compact"}
    again = incremental((TOPIC, "t", [("retention.ms", DELETE, None),
                                      ("cleanup.policy", SUBTRACT, "delete")]), image=image)
    assert topic_configs(apply(image, again)) == {"segment.ms": "5000",
                                                  "cleanup.policy": "compact"}
    emptied = incremental((TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert answers(emptied)[0][2] == ErrorCode.invalid_config  # storage wants the list non-empty


def test_appending_to_an_unset_list_starts_from_its_default() -> None:
    image = image_of(broker(1), topic("t", [[1]]))
    result = incremental((TOPIC, "t", [("cleanup.policy", APPEND, "compact")]), image=image)
    assert result.records == (topic_config("t", "cleanup.policy", "delete,compact"),)


def test_unchanged_topic_values_write_nothing_but_broker_values_always_do() -> None:
    result = incremental((TOPIC, "t", [("retention.ms", SET, "100")]),
                         (BROKER, "1", [("log.retention.ms", SET, "7")]),
                         (BROKER, "", [("log.retention.ms", DELETE, None)]))
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in result.records] == [
        (BROKER, "1", "log.retention.ms", "7"), (BROKER, "", "log.retention.ms", None)]
    assert all(code == ErrorCode.none for _, _, code, _ in answers(result))


@pytest.mark.parametrize(("configs", "code", "message"), [
    ([("retention.ms", SET, "soon")], ErrorCode.invalid_config,
     "Invalid value soon for configuration retention.ms"),
    ([("nope", SET, "1")], ErrorCode.invalid_config, "Unknown topic config name: nope"),
    ([("retention.ms", APPEND, "1")], ErrorCode.invalid_config,
     "Can't APPEND to key retention.ms because its type is not LIST."),
    ([("retention.ms", 9, "1")], ErrorCode.invalid_request, "Unknown config operation 9."),
])
def test_a_topics_resulting_configs_must_be_valid(configs: list[tuple[str, int, str]],
                                                  code: int, message: str) -> None:
    ((_, _, got_code, got_message),) = answers(incremental((TOPIC, "t", configs)))
    assert got_code == code and message in (got_message or "")


@pytest.mark.parametrize(("kind", "name", "code", "message"), [
    (TOPIC, "nope", ErrorCode.unknown_topic_or_partition, "The topic 'nope' does not exist."),
    (TOPIC, "", ErrorCode.invalid_request, "Default topic resources are not allowed."),
    (TOPIC, "a b", ErrorCode.invalid_topic_exception, None),
    (BROKER, "x", ErrorCode.invalid_request, "Unable to parse broker name as a base 10 number."),
    (BROKER, "-1", ErrorCode.invalid_request, "Invalid negative broker ID."),
    (BROKER, "7", ErrorCode.broker_id_not_registered, "No node with id 7 found."),
    (8, "1", ErrorCode.invalid_request, "Unknown resource type BROKER_LOGGER"),
    (32, "g", ErrorCode.invalid_request, "Unknown resource type GROUP"),
    (5, "x", ErrorCode.unsupported_version, "Unknown resource type 5."),
])
def test_resources_kafka_refuses(kind: int, name: str, code: int, message: str | None) -> None:
    ((_, _, got_code, got_message),) = answers(incremental(
        (kind, name, [("retention.ms", SET, "1")])))
    assert got_code == code
    if message is not None:
        assert got_message == message


def test_controllers_are_brokers_configs_may_name() -> None:
    result = incremental((BROKER, "3000", [("log.retention.ms", SET, "1")]))
    assert answers(result) == [(BROKER, "3000", ErrorCode.none, None)]


def test_a_resource_named_twice_fails_and_the_others_go_on() -> None:
    result = incremental((TOPIC, "t", [("retention.ms", SET, "1")]), (BROKER, "1", []),
                         (TOPIC, "t", [("retention.ms", SET, "2")]),
                         (TOPIC, "t", [("retention.ms", SET, "3")]))
    assert answers(result) == [(TOPIC, "t", ErrorCode.invalid_request, "Duplicate resource."),
                               (BROKER, "1", ErrorCode.none, None)]


def test_validate_only_writes_nothing() -> None:
    result = incremental((TOPIC, "t", [("retention.ms", SET, "1")]), validate_only=True)
    assert result.records == () and answers(result)[0][2] == ErrorCode.none


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_replaces_the_whole_set(version: int) -> None:
    result = legacy((TOPIC, "t", {"segment.ms": "5000", "retention.ms": "100"}), version=version)
    assert answers(result) == [(TOPIC, "t", ErrorCode.none, None)]
    assert result.records == (topic_config("t", "segment.ms", "5000"),
                              topic_config("t", "cleanup.policy", None))
    assert topic_configs(apply(IMAGE, result)) == {"segment.ms": "5000", "retention.ms": "100"}


def test_alter_configs_checks_the_result() -> None:
    result = legacy((TOPIC, "t", {"segment.ms": "0"}), (TOPIC, "nope", {}),
                    (BROKER, "1", {"log.retention.ms": "5"}))
    (topic_answer, missing, broker_answer) = answers(result)
    assert topic_answer[2] == ErrorCode.invalid_config and "segment.ms" in topic_answer[3]
    assert missing[2:] == (ErrorCode.unknown_topic_or_partition,
                           "The topic 'nope' does not exist.")
    assert broker_answer[2] == ErrorCode.none
    assert result.records == (ConfigRecord(resource_type=BROKER, resource_name="1",
                                           name="log.retention.ms", value="5"),)
