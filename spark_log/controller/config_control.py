"""Dynamic configs as the active controller changes them (Kafka's ConfigurationControlManager,
ControllerConfigurationValidator, the controller's resource existence check, and the request
checks of ControllerApis): IncrementalAlterConfigs (v0-v1) and AlterConfigs (v0-v2) for topic
and broker resources, as ConfigRecords.

Each resource succeeds or fails whole, with Kafka's error code and message: a resource type
Kafka does not know (UNSUPPORTED_VERSION) or named twice (INVALID_REQUEST) first, then each
resource in request order. A topic's resulting configs must pass storage's topic-config checks
(INVALID_CONFIG) and the topic must exist; a broker resource names the cluster default ("") or a
registered broker or controller, and its keys are not checked here (the forwarding broker checks
them, as in Kafka). A broker config is written even when its value does not change, so brokers
reload it (KAFKA-14136). BROKER_LOGGER changes are not metadata: brokers apply them themselves;
group and client-metrics configs are not supported (INVALID_REQUEST, as Kafka's controller
answers types it does not handle).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from spark_log.metadata import ConfigResource, ConfigResourceType, MetadataImage
from spark_log.metadata.records import ConfigRecord
from spark_log.protocol import ErrorCode
from spark_log.storage.data_dir.topics_file import InvalidTopicError, validate_topic_name
from spark_log.storage.log.log_config import BY_NAME, ConfigType, format_value

from .controller_result import ApiError, ControllerError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .topic_configs import validate_topic_configs

__all__ = ["AlterConfigOp", "alter_configs", "incremental_alter_configs"]

_INT32 = re.compile(r"[+-]?[0-9]+")
_KNOWN_TYPES = frozenset(int(t) for t in ConfigResourceType) - {0}


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs' config_operation ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


Changes = Callable[[MetadataImage, ConfigResource, Any], list[ConfigRecord]]


def incremental_alter_configs(image: MetadataImage, request: Any, *,
                              settings: ControllerSettings) -> ControllerResult[Any]:
    """An IncrementalAlterConfigs: the ConfigRecords of every resource that succeeds."""
    def changes(image: MetadataImage, resource: ConfigResource,
                entry: Any) -> list[ConfigRecord]:
        return _incremental_records(image, resource, entry.configs, settings)
    return _alter(image, request, settings, changes)


def alter_configs(image: MetadataImage, request: Any, *,
                  settings: ControllerSettings) -> ControllerResult[Any]:
    """An AlterConfigs (the legacy API): each resource's configs become exactly those given,
    the others being deleted."""
    def changes(image: MetadataImage, resource: ConfigResource,
                entry: Any) -> list[ConfigRecord]:
        return _replacement_records(image, resource, entry.configs)
    return _alter(image, request, settings, changes)


def _alter(image: MetadataImage, request: Any, settings: ControllerSettings,
           changes: Changes) -> ControllerResult[Any]:
    results: list[dict[str, Any]] = []
    resources: dict[ConfigResource, Any] = {}
    duplicates: set[ConfigResource] = set()
    for entry in request.resources:
        if entry.resource_type not in _KNOWN_TYPES:
            results.append(_result(entry.resource_type, entry.resource_name, ApiError(
                ErrorCode.unsupported_version, f"Unknown resource type {entry.resource_type}.")))
            continue
        resource = ConfigResource(ConfigResourceType(entry.resource_type), entry.resource_name)
        if resource in duplicates:
            continue
        if resources.pop(resource, None) is not None:
            duplicates.add(resource)
            results.append(_result(entry.resource_type, entry.resource_name, ApiError(
                ErrorCode.invalid_request, "Duplicate resource.")))
        else:
            resources[resource] = entry
    records: list[ConfigRecord] = []
    for resource, entry in resources.items():
        try:
            resource_records = changes(image, resource, entry)
            _check_resource(image, resource, resource_records, settings)
        except ControllerError as exc:
            results.append(_result(int(resource.type), resource.name, exc.api_error))
            continue
        records.extend(resource_records)
        results.append(_result(int(resource.type), resource.name, ApiError(ErrorCode.none)))
    result = ControllerResult.of(records, response_for(request, {"responses": results}))
    return result.without_records() if request.validate_only else result


def _result(resource_type: int, name: str, error: ApiError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message,
            "resource_type": resource_type, "resource_name": name}


# ---- the records of a change ----------------------------------------------------------------

def _record(resource: ConfigResource, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=int(resource.type), resource_name=resource.name,
                        name=name, value=value)


def _incremental_records(image: MetadataImage, resource: ConfigResource, configs: Any,
                         settings: ControllerSettings) -> list[ConfigRecord]:
    current = image.configs.get(resource, {})
    ops = {config.name: (config.config_operation, config.value) for config in configs}
    records = []
    for name, (op, value) in ops.items():
        old = current.get(name)
        new = _apply_op(resource, name, op, old, value, settings)
        if new != old or resource.type is ConfigResourceType.BROKER:
            records.append(_record(resource, name, new))
    return records


def _apply_op(resource: ConfigResource, name: str, op: int, old: str | None,
              value: str | None, settings: ControllerSettings) -> str | None:
    if op == AlterConfigOp.SET:
        return value
    if op == AlterConfigOp.DELETE:
        return None
    if op not in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
        raise ControllerError(ErrorCode.invalid_request, f"Unknown config operation {op}.")
    if not _is_list(resource, name, settings):
        raise ControllerError(ErrorCode.invalid_config, f"Can't {AlterConfigOp(op).name} to key "
                                                        f"{name} because its type is not LIST.")
    parts = _parts(resource, name, old)
    for item in (value or "").split(","):
        if op == AlterConfigOp.APPEND and item not in parts:
            parts.append(item)
        elif op == AlterConfigOp.SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def _is_list(resource: ConfigResource, name: str, settings: ControllerSettings) -> bool:
    if resource.type is ConfigResourceType.TOPIC:
        definition = BY_NAME.get(name)
        return definition is not None and definition.type is ConfigType.LIST
    return name in settings.broker_list_configs


def _parts(resource: ConfigResource, name: str, value: str | None) -> list[str]:
    """A list config's items; its default's when it is not set (topic configs)."""
    if value is None and resource.type is ConfigResourceType.TOPIC and name in BY_NAME:
        value = format_value(BY_NAME[name], BY_NAME[name].default)
    return [part for part in (value or "").split(",") if part]


def _replacement_records(image: MetadataImage, resource: ConfigResource,
                         configs: Any) -> list[ConfigRecord]:
    current = image.configs.get(resource, {})
    wanted = {config.name: config.value for config in configs}
    records = [_record(resource, name, value) for name, value in wanted.items()
               if current.get(name) != value or resource.type is ConfigResourceType.BROKER]
    records += [_record(resource, name, None) for name in current if name not in wanted]
    return records


# ---- checks ---------------------------------------------------------------------------------

def _check_resource(image: MetadataImage, resource: ConfigResource,
                    records: list[ConfigRecord], settings: ControllerSettings) -> None:
    """Kafka's validator, then the existence check; ControllerError if either refuses."""
    if resource.type is ConfigResourceType.TOPIC:
        _check_topic_name(resource.name)
        validate_topic_configs(_after(image.configs.get(resource, {}), records), settings)
        if image.topic(resource.name) is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                  f"The topic '{resource.name}' does not exist.")
    elif resource.type is ConfigResourceType.BROKER:
        if resource.name:
            _check_broker(image, resource.name, settings)
    else:
        raise ControllerError(ErrorCode.invalid_request,
                              f"Unknown resource type {resource.type.name}")


def _after(current: Mapping[str, str], records: list[ConfigRecord]) -> dict[str, str]:
    configs = dict(current)
    for record in records:
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
    return configs


def _check_topic_name(name: str) -> None:
    if not name:
        raise ControllerError(ErrorCode.invalid_request,
                              "Default topic resources are not allowed.")
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise ControllerError(ErrorCode.invalid_topic_exception, str(exc)) from None


def _check_broker(image: MetadataImage, name: str, settings: ControllerSettings) -> None:
    if not _INT32.fullmatch(name) or not -(2**31) <= int(name) < 2**31:
        raise ControllerError(ErrorCode.invalid_request,
                              "Unable to parse broker name as a base 10 number.")
    node_id = int(name)
    if node_id < 0:
        raise ControllerError(ErrorCode.invalid_request, "Invalid negative broker ID.")
    if image.broker(node_id) is None and node_id not in settings.controller_ids:
        raise ControllerError(ErrorCode.broker_id_not_registered,
                              f"No node with id {node_id} found.")
