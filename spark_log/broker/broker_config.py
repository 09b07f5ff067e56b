"""Broker settings under Kafka's own names (`num.partitions`, `log.retention.ms`, ...).

`BrokerConfig.from_properties` validates a flat `name -> string` map (from `--config k=v` flags or
a `server.properties` file) against the definitions below and fails with a message naming the key.
Keys Kafka knows but a single embedded broker has no use for (ZooKeeper/KRaft plumbing, SASL
listeners maps ...) are accepted and logged as ignored, so a Kafka properties file still loads.
`topic_defaults()` maps the broker-wide `log.*` settings onto the topic-level names that storage's
`LogConfig` uses, exactly as Kafka derives a topic's defaults from its broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_log.properties import ConfigError

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # int | long | double | boolean | string | list
    default: Any
    doc: str


def _d(name: str, type_: str, default: Any, doc: str) -> ConfigDef:
    return ConfigDef(name, type_, default, doc)


DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        _d("node.id", "int", 0, "The id of this broker (alias broker.id)."),
        _d("broker.id", "int", None, "Alias of node.id."),
        _d("listeners", "string", "PLAINTEXT://127.0.0.1:9092", "Where the broker listens."),
        _d("advertised.listeners", "string", None,
           "The address clients are told to use; defaults to the bound listener."),
        _d("log.dirs", "string", None, "The data directory (one directory is supported)."),
        _d("log.dir", "string", None, "Alias of log.dirs."),
        _d("cluster.id", "string", None, "Cluster id; generated and stored in meta.properties."),
        _d("num.partitions", "int", 1, "Partitions of an auto-created topic."),
        _d("default.replication.factor", "int", 1, "Replication factor of auto-created topics."),
        _d("auto.create.topics.enable", "boolean", True,
           "Create a topic when a client asks for its metadata or produces to it."),
        _d("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
        _d("message.max.bytes", "int", 1048588, "Largest record batch the broker accepts."),
        _d("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted."),
        _d("log.segment.bytes", "int", 1073741824, "Default segment.bytes."),
        _d("log.roll.ms", "long", None, "Default segment.ms (overrides log.roll.hours)."),
        _d("log.roll.hours", "int", 168, "Default segment.ms in hours."),
        _d("log.roll.jitter.ms", "long", None, "Default segment.jitter.ms."),
        _d("log.roll.jitter.hours", "int", 0, "Default segment.jitter.ms in hours."),
        _d("log.index.size.max.bytes", "int", 10485760, "Default segment.index.bytes."),
        _d("log.index.interval.bytes", "int", 4096, "Default index.interval.bytes."),
        _d("log.retention.ms", "long", None, "Default retention.ms (wins over minutes/hours)."),
        _d("log.retention.minutes", "int", None, "Default retention.ms in minutes."),
        _d("log.retention.hours", "int", 168, "Default retention.ms in hours."),
        _d("log.retention.bytes", "long", -1, "Default retention.bytes."),
        _d("log.retention.check.interval.ms", "long", 300000,
           "How often retention deletes old segments."),
        _d("log.cleanup.policy", "list", "delete", "Default cleanup.policy."),
        _d("log.flush.interval.messages", "long", 9223372036854775807,
           "Default flush.messages (default: leave flushing to the OS page cache)."),
        _d("log.flush.interval.ms", "long", None, "Default flush.ms."),
        _d("log.flush.scheduler.interval.ms", "long", 9223372036854775807,
           "How often logs are checked for a due flush.ms."),
        _d("log.flush.offset.checkpoint.interval.ms", "int", 60000,
           "How often recovery points are checkpointed."),
        _d("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
           "How often log start offsets are checkpointed."),
        _d("log.message.timestamp.type", "string", "CreateTime",
           "Default message.timestamp.type."),
        _d("log.message.timestamp.before.max.ms", "long", 9223372036854775807,
           "Default message.timestamp.before.max.ms."),
        _d("log.message.timestamp.after.max.ms", "long", 3600000,
           "Default message.timestamp.after.max.ms."),
        _d("log.preallocate", "boolean", False, "Default preallocate."),
        _d("log.segment.delete.delay.ms", "long", 60000, "Default file.delete.delay.ms."),
        _d("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
        _d("log.cleaner.backoff.ms", "long", 15000, "Sleep between cleaner passes."),
        _d("log.cleaner.min.cleanable.ratio", "double", 0.5, "Default min.cleanable.dirty.ratio."),
        _d("log.cleaner.delete.retention.ms", "long", 86400000, "Default delete.retention.ms."),
        _d("log.cleaner.min.compaction.lag.ms", "long", 0, "Default min.compaction.lag.ms."),
        _d("log.cleaner.max.compaction.lag.ms", "long", 9223372036854775807,
           "Default max.compaction.lag.ms."),
        _d("compression.type", "string", "producer", "Default compression.type."),
        _d("min.insync.replicas", "int", 1, "Default min.insync.replicas."),
        _d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets."),
        _d("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of __consumer_offsets."),
        _d("offsets.topic.replication.factor", "int", 1, "Replication of __consumer_offsets."),
        _d("offsets.retention.minutes", "int", 10080,
           "How long offsets of an empty group are kept."),
        _d("offsets.retention.check.interval.ms", "long", 600000,
           "How often expired offsets are removed."),
        _d("offsets.commit.timeout.ms", "int", 5000, "Timeout of an offset commit append."),
        _d("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout allowed."),
        _d("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout allowed."),
        _d("group.initial.rebalance.delay.ms", "int", 3000,
           "Delay of the first rebalance of a new group, to let more members join."),
        _d("group.max.size", "int", 2147483647, "Most members a group may have."),
        _d("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms allowed."),
        _d("transaction.state.log.num.partitions", "int", 50,
           "Partitions of __transaction_state."),
        _d("transaction.state.log.segment.bytes", "int", 104857600,
           "segment.bytes of __transaction_state."),
        _d("transaction.state.log.replication.factor", "int", 1,
           "Replication of __transaction_state."),
        _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
           "How often timed-out transactions are aborted."),
        _d("transactional.id.expiration.ms", "int", 604800000,
           "How long an idle transactional id is remembered."),
        _d("producer.id.expiration.ms", "int", 86400000,
           "How long an idle producer id's state is kept."),
        _d("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
           "How often expired transactional ids are removed."),
        _d("producer.id.expiration.check.interval.ms", "int", 600000,
           "How often idle producer ids are expired from partitions."),
    ]
}

# Kafka settings that have no meaning for this broker; accepted so server.properties files load.
IGNORED_PREFIXES = (
    "zookeeper.", "controller.", "process.roles", "listener.security.protocol.map",
    "inter.broker.", "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir", "group.coordinator.",
    "share.", "metadata.", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "num.replica.fetchers", "replica.", "unclean.leader.election.enable",
    "confluent.", "ssl.", "sasl.",
)

ALIASES = {"broker.id": "node.id", "log.dir": "log.dirs"}

# Topic config -> the broker settings that give its default, most specific first (Kafka's
# synonyms, as DescribeConfigs lists them).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "cleanup.policy": ("log.cleanup.policy",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "preallocate": ("log.preallocate",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "compression.type": ("compression.type",),
    "min.insync.replicas": ("min.insync.replicas",),
}


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
    """Validated broker settings. Immutable; `get(name)` answers with the default when unset."""

    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        values: dict[str, Any] = {}
        for key, raw in props.items():
            name = ALIASES.get(key, key)
            defn = DEFINITIONS.get(name)
            if defn is None:
                if key.startswith(IGNORED_PREFIXES):
                    log.info("broker config %s is not used by this broker; ignored", key)
                    continue
                raise ConfigError(f"unknown broker config {key!r}" + _did_you_mean(key))
            values[name] = _parse(defn, raw)
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

    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def data_dir(self) -> Path | None:
        raw = self.get("log.dirs")
        if raw is None:
            return None
        dirs = [d for d in str(raw).split(",") if d.strip()]
        return Path(dirs[0].strip())

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
        checks: list[tuple[str, Callable[[Any], bool], str]] = [
            ("num.partitions", lambda v: v >= 1, "must be at least 1"),
            ("message.max.bytes", lambda v: v >= 0, "must not be negative"),
            ("socket.request.max.bytes", lambda v: v >= 1024, "must be at least 1024"),
            ("offsets.topic.num.partitions", lambda v: v >= 1, "must be at least 1"),
            ("transaction.state.log.num.partitions", lambda v: v >= 1, "must be at least 1"),
            ("log.segment.bytes", lambda v: v >= 14, "must be at least 14"),
            ("node.id", lambda v: v >= 0, "must not be negative"),
        ]
        for name, ok, why in checks:
            value = self.get(name)
            if not ok(value):
                raise ConfigError(f"invalid value {value!r} for broker config {name}: {why}")
        lo = self.get("group.min.session.timeout.ms")
        hi = self.get("group.max.session.timeout.ms")
        if lo > hi:
            raise ConfigError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _did_you_mean(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key, DEFINITIONS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
