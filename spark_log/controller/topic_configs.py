"""A topic's configs as the controller resolves them (Kafka's KafkaConfigSchema and
ConfigurationControlManager.getTopicConfig): the topic's own setting, else this controller's
dynamic broker setting, else the cluster-wide dynamic default, else the broker's static default
(`ControllerSettings.topic_defaults`), else the config's default; and the check a topic's whole
config set must pass, with storage's definitions (`storage.log.log_config`).

Dynamic broker settings count for a topic config of the same name only
(`unclean.leader.election.enable`, `min.insync.replicas`, ...): the broker-level synonyms of the
`log.*` family are not mapped here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from spark_log.metadata import ConfigResource, ConfigResourceType, MetadataImage
from spark_log.protocol import ErrorCode
from spark_log.storage.errors import InvalidConfigurationError
from spark_log.storage.log.log_config import (
    BY_NAME,
    LogConfig,
    format_value,
    public_definitions,
)

from .controller_result import ControllerError
from .controller_settings import ControllerSettings

__all__ = [
    "ConfigSource",
    "effective_topic_configs",
    "topic_config_value",
    "unclean_leader_election_enabled",
    "validate_topic_configs",
]

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs config sources, as CreateTopics responses carry them."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


def _resolve(image: MetadataImage, settings: ControllerSettings, topic_overrides: Mapping[str, str],
             name: str) -> tuple[str | None, ConfigSource]:
    """(value, source) of topic config `name` for a topic with `topic_overrides`."""
    if name in topic_overrides:
        return topic_overrides[name], ConfigSource.TOPIC_CONFIG
    node = image.configs.get(ConfigResource(ConfigResourceType.BROKER, str(settings.node_id)))
    if node is not None and name in node:
        return node[name], ConfigSource.DYNAMIC_BROKER_CONFIG
    cluster = image.configs.get(ConfigResource(ConfigResourceType.BROKER, ""))
    if cluster is not None and name in cluster:
        return cluster[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    if name in settings.topic_defaults:
        return settings.topic_defaults[name], ConfigSource.STATIC_BROKER_CONFIG
    definition = BY_NAME[name]
    return format_value(definition, definition.default), ConfigSource.DEFAULT_CONFIG


def topic_config_value(image: MetadataImage, settings: ControllerSettings, topic: str,
                       name: str) -> str | None:
    """The effective value of config `name` for `topic`, as a property string."""
    return _resolve(image, settings, image.topic_configs(topic), name)[0]


def unclean_leader_election_enabled(image: MetadataImage, settings: ControllerSettings,
                                    topic: str) -> bool:
    """Whether `topic` may elect a leader from outside its ISR."""
    value = topic_config_value(image, settings, topic, UNCLEAN_LEADER_ELECTION_ENABLE)
    return (value or "").strip().lower() == "true"


def effective_topic_configs(image: MetadataImage, settings: ControllerSettings,
                            overrides: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every public topic config of a new topic with `overrides`, by name, as CreateTopics
    (v5+) lists them: value, source, neither read-only nor sensitive."""
    entries = []
    for definition in sorted(public_definitions(), key=lambda d: d.name):
        value, source = _resolve(image, settings, overrides, definition.name)
        entries.append({"name": definition.name, "value": value, "read_only": False,
                        "config_source": int(source), "is_sensitive": False})
    return entries


def validate_topic_configs(configs: Mapping[str, str], settings: ControllerSettings) -> None:
    """Raise ControllerError(INVALID_CONFIG), with storage's message naming the config, unless
    `configs` (a topic's whole set of overrides) are known topic configs with valid values."""
    try:
        base = LogConfig.from_properties(settings.topic_defaults)
        LogConfig.from_properties(configs, base=base)
    except InvalidConfigurationError as exc:
        raise ControllerError(ErrorCode.invalid_config, str(exc)) from None
