"""`BrokerConfig`: a node's validated settings (Kafka's KafkaConfig) and the typed accessors the
broker, the controller and `spark-log storage` read them through.

`BrokerConfig.from_properties` checks a flat `name -> string` map (from `--config k=v` flags or
a `server.properties` file) against `definitions`: an unknown key, a value of the wrong type or
below its minimum, or roles, voters and listeners that do not work together (`node_checks`)
is a `ConfigError` of one line naming the key. Kafka settings a node here has no use for are
accepted and logged as ignored, so a Kafka properties file still loads. `topic_defaults()` maps
the broker-wide `log.*` settings onto the topic-level names storage's `LogConfig` uses, as
Kafka derives a topic's defaults from its broker.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from spark_log.node_config.definitions import (
    ALIASES,
    DEFINITIONS,
    TOPIC_SYNONYMS,
    ConfigDef,
    ignored,
)
from spark_log.node_config.endpoints import split_list
from spark_log.node_config.node import Listener, Node, parse_node
from spark_log.node_config.node_checks import check_node
from spark_log.properties import ConfigError
from spark_log.raft.config import QuorumConfig

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


def _parse(defn: ConfigDef, raw: str) -> Any:
    text = raw.strip()
    try:
        if defn.type in ("int", "long"):
            return int(text)
        if defn.type == "double":
            return float(text)
        if defn.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        return text
    except ValueError as e:
        raise ConfigError(f"invalid value {raw!r} for broker config {defn.name}: {e}") from None


@dataclass(frozen=True)
class BrokerConfig:
    """Validated node settings. Immutable; `get(name)` answers with the default when unset."""

    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        values: dict[str, Any] = {}
        for key, raw in props.items():
            name = ALIASES.get(key, key)
            defn = DEFINITIONS.get(name)
            if defn is None:
                if ignored(key):
                    log.info("broker config %s is not used by this broker; ignored", key)
                    continue
                raise ConfigError(f"unknown broker config {key!r}" + _did_you_mean(key))
            values[name] = _parse(defn, raw)
        _check_node_id_alias(props)
        config = cls(values)
        config._validate()
        return config

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        return DEFINITIONS[name].default

    def with_overrides(self, **overrides: Any) -> BrokerConfig:
        values = dict(self.values)
        values.update({k.replace("_", "."): v for k, v in overrides.items()})
        return BrokerConfig(values)

    # ---- identity and storage ---------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        """log.dirs (or log.dir), in the order given."""
        return tuple(Path(d) for d in split_list(self.get("log.dirs")))

    @property
    def data_dir(self) -> Path | None:
        """The first of log.dirs: where this broker keeps its logs."""
        return self.log_dirs[0] if self.log_dirs else None

    @property
    def metadata_log_dir(self) -> Path | None:
        """Where the cluster metadata log is kept: metadata.log.dir, else the first log dir."""
        raw = self.get("metadata.log.dir")
        return Path(raw.strip()) if raw and raw.strip() else self.data_dir

    @property
    def storage_dirs(self) -> tuple[Path, ...]:
        """Every directory that holds a meta.properties: the log dirs and the metadata log dir,
        each once, sorted (as kafka-storage.sh lists them)."""
        dirs = {*self.log_dirs, *([self.metadata_log_dir] if self.metadata_log_dir else [])}
        return tuple(sorted(dirs))

    @property
    def formats_new_dirs(self) -> bool:
        """Whether a start formats a data directory that has no meta.properties yet: only the
        single node that is its own quorum does; a member of a quorum needs `spark-log storage
        format`, so that every node of the cluster holds the same cluster id."""
        return not self.voters

    # ---- roles, quorum and listeners ------------------------------------------------------
    @cached_property
    def node(self) -> Node:
        """The node these settings describe (roles, voters, listeners), parsed once."""
        return parse_node(self.get, self.values.keys())

    @property
    def roles(self) -> frozenset[str]:
        """process.roles: {"broker"}, {"controller"} or both."""
        return self.node.roles

    @property
    def is_broker(self) -> bool:
        return self.node.is_broker

    @property
    def is_controller(self) -> bool:
        return self.node.is_controller

    @property
    def voters(self) -> Mapping[int, tuple[str, int]]:
        """controller.quorum.voters as {id: (host, port)}; empty: this node alone is the
        quorum (no controller listener needed)."""
        return self.node.voters

    def quorum_config(self) -> QuorumConfig:
        """The quorum's settings for raft: the voters' ids (this node's alone when none are
        configured) and the controller.quorum.* timeouts."""
        return QuorumConfig(
            voters=frozenset(self.voters) or frozenset({self.node_id}),
            election_timeout_ms=self.get("controller.quorum.election.timeout.ms"),
            election_backoff_max_ms=self.get("controller.quorum.election.backoff.max.ms"),
            fetch_timeout_ms=self.get("controller.quorum.fetch.timeout.ms"),
            request_timeout_ms=self.get("controller.quorum.request.timeout.ms"),
            retry_backoff_ms=self.get("controller.quorum.retry.backoff.ms"))

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """Every listener to bind, with its name, protocol, address and advertised address."""
        return self.node.listeners

    @property
    def controller_listeners(self) -> tuple[Listener, ...]:
        """The listeners the controller serves, in the order of controller.listener.names (the
        first one is the quorum's)."""
        return self.node.controller_listeners

    @property
    def broker_listeners(self) -> tuple[Listener, ...]:
        """The listeners clients and other brokers reach the broker on."""
        return self.node.broker_listeners

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        """controller.listener.names: on a broker-only node, how it reaches the controllers."""
        return self.node.controller_names

    @property
    def inter_broker_listener(self) -> Listener | None:
        """The listener brokers replicate through (inter.broker.listener.name); None on a
        controller-only node."""
        return self.node.inter_broker_listener

    @property
    def rack(self) -> str | None:
        return self.get("broker.rack") or None

    # ---- topic defaults ---------------------------------------------------------------------
    def retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return self.get("log.retention.ms")
        if self.get("log.retention.minutes") is not None:
            return self.get("log.retention.minutes") * 60_000
        return self.get("log.retention.hours") * HOUR_MS

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level defaults (LogConfig names) derived from the broker's `log.*` settings."""
        out: dict[str, str] = {}
        for topic_name, broker_names in TOPIC_SYNONYMS.items():
            value = self._topic_default(topic_name, broker_names)
            if value is not None:
                out[topic_name] = _render(value)
        return out

    def _topic_default(self, topic_name: str, broker_names: tuple[str, ...]) -> Any:
        if topic_name == "retention.ms":
            return self.retention_ms()
        # The first name that is set wins (log.roll.ms over log.roll.hours).
        for name in broker_names:
            if self.get(name) is not None:
                value = self.get(name)
                return value * HOUR_MS if name.endswith(".hours") else value
        return None

    def set_explicitly(self, topic_name: str) -> str | None:
        """The broker setting that defines topic config `topic_name`, if one was set."""
        return next((n for n in TOPIC_SYNONYMS.get(topic_name, ()) if n in self.values), None)

    def _validate(self) -> None:
        for name, value in self.values.items():
            minimum = DEFINITIONS[name].at_least
            if minimum is not None and value is not None and value < minimum:
                why = "must not be negative" if minimum == 0 else f"must be at least {minimum}"
                raise ConfigError(f"invalid value {value!r} for broker config {name}: {why}")
        lo = self.get("group.min.session.timeout.ms")
        hi = self.get("group.max.session.timeout.ms")
        if lo > hi:
            raise ConfigError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        check_node(self.node)


def _check_node_id_alias(props: Mapping[str, str]) -> None:
    """Kafka's rule when both names are given: they must agree."""
    if "node.id" in props and "broker.id" in props \
            and props["node.id"].strip() != props["broker.id"].strip():
        raise ConfigError("You must set `node.id` to the same value as `broker.id` (given "
                          f"node.id={props['node.id']}, broker.id={props['broker.id']})")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _did_you_mean(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key, DEFINITIONS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
