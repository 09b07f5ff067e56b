"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

A topic config's source is Kafka's: the topic's own override (DYNAMIC_TOPIC_CONFIG), else a
broker setting given at start (STATIC_BROKER_CONFIG), else the default; synonyms list them in
that order. Topic overrides are cluster metadata, changed through the controller (AlterConfigs
replaces a topic's whole override set; IncrementalAlterConfigs applies SET, DELETE, APPEND and
SUBTRACT to single keys). Broker settings are static here — they are described but altering
them answers INVALID_REQUEST, naming the flag to restart with — except the dynamic-only ones
(the replication throttle rates): a BROKER resource that changes only those, with valid values,
goes to the controller like a topic's, and they are described from the cluster metadata (the
broker's own value, DYNAMIC_BROKER_CONFIG, else the cluster default "", DYNAMIC_DEFAULT_BROKER_
CONFIG, else the default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any

from spark_log.broker.broker_config import DEFINITIONS as BROKER_DEFINITIONS
from spark_log.broker.broker_config import DYNAMIC_BROKER_CONFIGS, invalid_value
from spark_log.broker.errors import KafkaError, error_code_for, error_message_for
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.metadata import ConfigResource, ConfigResourceType
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.storage.log.log_config import ConfigType, format_value, public_definitions


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


_BROKER_TYPES = {"int": ConfigType.INT, "long": ConfigType.LONG, "double": ConfigType.DOUBLE,
                 "boolean": ConfigType.BOOLEAN, "string": ConfigType.STRING,
                 "list": ConfigType.LIST}


# ---- describe ----------------------------------------------------------------------------------
def topic_config_entries(services: Services, overrides: Mapping[str, str],
                         keys: Iterable[str] | None, synonyms: bool = False,
                         docs: bool = False) -> list[dict[str, Any]]:
    """DescribeConfigs entries for a topic with `overrides` (also used by CreateTopics v5+)."""
    config = services.topics.log_config("", overrides)
    wanted = set(keys) if keys else None
    entries = []
    for d in public_definitions():
        if wanted is not None and d.name not in wanted:
            continue
        chain = _topic_synonyms(services, d, overrides)
        entries.append({
            "name": d.name, "value": format_value(d, config.value_of(d.name)),
            "read_only": False, "is_default": chain[0]["source"] == ConfigSource.DEFAULT_CONFIG,
            "config_source": chain[0]["source"], "is_sensitive": False,
            "synonyms": chain if synonyms else [], "config_type": d.type,
            "documentation": d.doc if docs else None,
        })
    return entries


def _topic_synonyms(services: Services, d: Any, overrides: Mapping[str, str]
                    ) -> list[dict[str, Any]]:
    chain = []
    if d.name in overrides:
        chain.append({"name": d.name, "value": overrides[d.name],
                      "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
    broker_name = services.config.set_explicitly(d.name)
    if broker_name is not None:
        chain.append({"name": broker_name, "value": str(services.config.get(broker_name)),
                      "source": ConfigSource.STATIC_BROKER_CONFIG})
    chain.append({"name": d.name, "value": format_value(d, d.default),
                  "source": ConfigSource.DEFAULT_CONFIG})
    return chain


def _broker_entries(services: Services, keys: Iterable[str] | None, synonyms: bool,
                    docs: bool) -> list[dict[str, Any]]:
    wanted = set(keys) if keys else None
    entries = []
    for d in BROKER_DEFINITIONS.values():
        if wanted is not None and d.name not in wanted:
            continue
        value = services.config.get(d.name)
        source = ConfigSource.STATIC_BROKER_CONFIG if d.name in services.config.values \
            else ConfigSource.DEFAULT_CONFIG
        text = None if value is None else (str(value).lower() if isinstance(value, bool)
                                           else str(value))
        entries.append({
            "name": d.name, "value": text, "read_only": True,
            "is_default": source == ConfigSource.DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": False,
            "synonyms": [{"name": d.name, "value": text, "source": source}] if synonyms else [],
            "config_type": _BROKER_TYPES[d.type], "documentation": d.doc if docs else None,
        })
    for d in DYNAMIC_BROKER_CONFIGS.values():
        if wanted is None or d.name in wanted:
            entries.append(_dynamic_entry(services, d, synonyms, docs))
    return entries


def _dynamic_entry(services: Services, d: Any, synonyms: bool, docs: bool) -> dict[str, Any]:
    """A dynamic-only broker config as the cluster metadata sets it for this broker."""
    configs = services.cluster.image.configs
    chain = [{"name": d.name, "value": values[d.name], "source": source}
             for name, source in ((str(services.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                                  ("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
             if d.name in (values := configs.get(
                 ConfigResource(ConfigResourceType.BROKER, name), {}))]
    chain.append({"name": d.name, "value": str(d.default), "source": ConfigSource.DEFAULT_CONFIG})
    return {"name": d.name, "value": chain[0]["value"], "read_only": False,
            "is_default": chain[0]["source"] == ConfigSource.DEFAULT_CONFIG,
            "config_source": chain[0]["source"], "is_sensitive": False,
            "synonyms": chain if synonyms else [], "config_type": _BROKER_TYPES[d.type],
            "documentation": d.doc if docs else None}


@handles(ApiKey.DESCRIBE_CONFIGS)
async def handle_describe_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    synonyms = getattr(request, "include_synonyms", False)
    docs = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        result = {"error_code": ErrorCode.none, "error_message": None,
                  "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        try:
            result["configs"] = _describe(ctx.services, resource, synonyms, docs)
        except Exception as exc:
            result.update(error_code=error_code_for(exc), error_message=error_message_for(exc))
        results.append(result)
    return {"throttle_time": 0, "results": results}


def _describe(services: Services, resource: Any, synonyms: bool, docs: bool
              ) -> list[dict[str, Any]]:
    keys = resource.configuration_keys
    if resource.resource_type == ResourceType.TOPIC:
        info = services.topics.metadata.require(resource.resource_name)
        return topic_config_entries(services, info.configs, keys, synonyms, docs)
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(services, resource.resource_name)
        return _broker_entries(services, keys, synonyms, docs)
    raise KafkaError(ErrorCode.invalid_request,
                     f"resource type {resource.resource_type} is not supported")


def _check_broker_name(services: Services, name: str) -> None:
    if name not in ("", str(services.node_id)):
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {services.node_id} or empty string, "
                         f"but received {name}")


# ---- alter -------------------------------------------------------------------------------------
@handles(ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    """Topic configs and dynamic broker configs are cluster metadata: those resources go to the
    controller (which checks topic keys and values, and that a broker exists, and commits
    ConfigRecords). Other broker settings are static here: altering them is refused on the
    spot, naming the flag to restart with."""
    forwarded, refused = [], {}
    for resource in request.resources:
        try:
            if resource.resource_type == ResourceType.BROKER:
                _check_dynamic(resource)
            elif resource.resource_type != ResourceType.TOPIC:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"resource type {resource.resource_type} is not supported")
            forwarded.append(resource)
        except KafkaError as exc:
            refused[(resource.resource_type, resource.resource_name)] = exc
    answers: dict[tuple[int, str], Any] = {}
    if forwarded:
        response = await ctx.services.topics.forward(dataclasses.replace(
            request, resources=tuple(forwarded)))
        answers = {(r.resource_type, r.resource_name): r for r in response.responses}
    responses = []
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        response = {"error_code": ErrorCode.none, "error_message": None,
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name}
        if key in answers:
            found = answers[key]
            response.update(error_code=found.error_code, error_message=found.error_message)
        elif key in refused:
            response.update(error_code=error_code_for(refused[key]),
                            error_message=error_message_for(refused[key]))
        responses.append(response)
    return {"throttle_time": 0, "responses": responses}


def _check_dynamic(resource: Any) -> None:
    """A broker resource may change dynamic-only configs, to valid values; KafkaError else."""
    for config in resource.configs:
        if config.name not in DYNAMIC_BROKER_CONFIGS:
            raise KafkaError(ErrorCode.invalid_request,
                             f"{config.name} is a static broker config: restart the broker "
                             f"with --config {config.name}=VALUE")
        operation = getattr(config, "config_operation", 0)  # AlterConfigs only sets
        problem = invalid_value(config.name, config.value) if operation == 0 else None
        if problem is not None:
            raise KafkaError(ErrorCode.invalid_config, problem)
