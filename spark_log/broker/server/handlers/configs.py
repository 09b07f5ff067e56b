"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

A topic config's source is Kafka's: the topic's own override (DYNAMIC_TOPIC_CONFIG), else a
broker setting given at start (STATIC_BROKER_CONFIG), else the default; synonyms list them in
that order. Topic overrides are cluster metadata, changed through the controller (AlterConfigs
replaces a topic's whole override set; IncrementalAlterConfigs applies SET, DELETE, APPEND and
SUBTRACT to single keys). Broker settings are static here — they are described but altering
them answers INVALID_REQUEST, naming the flag to restart with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any

from spark_log.broker.broker_config import DEFINITIONS as BROKER_DEFINITIONS
from spark_log.broker.errors import KafkaError, error_code_for, error_message_for
from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.broker.server.services import Services
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.storage.log.log_config import ConfigType, format_value, public_definitions


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
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
    return entries


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
    """Topic configs are cluster metadata: those resources go to the controller (which checks
    every key and value and commits ConfigRecords). Broker settings are static here: altering
    them is refused on the spot, naming the flag to restart with."""
    topics = tuple(r for r in request.resources if r.resource_type == ResourceType.TOPIC)
    answers: dict[tuple[int, str], Any] = {}
    if topics:
        response = await ctx.services.topics.forward(dataclasses.replace(request,
                                                                         resources=topics))
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
        else:
            try:
                _refuse(ctx.services, resource)
            except Exception as exc:
                response.update(error_code=error_code_for(exc),
                                error_message=error_message_for(exc))
        responses.append(response)
    return {"throttle_time": 0, "responses": responses}


def _refuse(services: Services, resource: Any) -> None:
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(services, resource.resource_name)
        raise KafkaError(ErrorCode.invalid_request,
                         "broker configs are static: restart the broker with --config KEY=VALUE")
    raise KafkaError(ErrorCode.invalid_request,
                     f"resource type {resource.resource_type} is not supported")
