"""Every setting of a node under Kafka's name, with Kafka's type and default and the smallest
value it takes (`ConfigDef`); the aliases, the Kafka settings accepted and ignored, and which
broker settings give each topic config its default (Kafka's synonyms).

Defaults are Kafka's except where a single embedded node needs its own: `listeners` binds the
loopback address, `node.id` is 0, `process.roles` is both roles and `controller.quorum.voters`
is empty (the node is a quorum of its own, as the sidecar runs), `controller.listener.names`
is CONTROLLER and `inter.broker.listener.name` PLAINTEXT (Kafka derives them when unset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_LONG = 9223372036854775807


@dataclass(frozen=True)
class ConfigDef:
    """One setting. `type` is int | long | double | boolean | string | list (a list stays the
    text it was given; accessors split it); `at_least` is the smallest value allowed."""

    name: str
    type: str
    default: Any
    doc: str
    at_least: int | None = None


def _d(name: str, type_: str, default: Any, doc: str, at_least: int | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, at_least)


_NODE = [
    _d("process.roles", "list", "broker,controller",
       "The roles of this node: broker, controller, or both (the default)."),
    _d("node.id", "int", 0, "The id of this node (alias broker.id).", 0),
    _d("broker.id", "int", None, "Alias of node.id."),
    _d("controller.quorum.voters", "list", "",
       "The controller quorum as id@host:port,...; empty: this node alone is the quorum."),
    _d("controller.quorum.election.timeout.ms", "int", 1000,
       "How long a quorum member waits for the leader before it starts an election.", 1),
    _d("controller.quorum.fetch.timeout.ms", "int", 2000,
       "How long a voter goes without a successful fetch before it starts an election.", 1),
    _d("controller.quorum.election.backoff.max.ms", "int", 1000,
       "Longest wait before a new election after a failed one.", 1),
    _d("controller.quorum.request.timeout.ms", "int", 2000,
       "How long a quorum request waits for its response.", 1),
    _d("controller.quorum.retry.backoff.ms", "int", 20,
       "Wait before a failed quorum request is retried.", 0),
    _d("controller.socket.timeout.ms", "int", 30000,
       "How long a broker's request to the active controller may take, retries included.", 1),
    _d("controller.listener.names", "string", "CONTROLLER",
       "The listeners the controller serves (comma-separated names)."),
    _d("listeners", "string", "PLAINTEXT://127.0.0.1:9092",
       "Where the node listens: NAME://host:port,... (an empty host: every interface)."),
    _d("advertised.listeners", "string", None,
       "What clients and other nodes are told, per listener name; default: the listeners."),
    _d("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       "The security protocol of each listener name, NAME:PROTOCOL,... (PLAINTEXT is served)."),
    _d("inter.broker.listener.name", "string", "PLAINTEXT",
       "The listener brokers replicate through."),
    _d("broker.session.timeout.ms", "int", 9000,
       "How long a broker stays registered without a heartbeat.", 1),
    _d("broker.heartbeat.interval.ms", "int", 2000, "Time between a broker's heartbeats.", 1),
    _d("broker.rack", "string", None, "The rack of this broker, for replica placement."),
    _d("metadata.log.dir", "string", None,
       "Where the cluster metadata log is kept; default: the first of log.dirs."),
    _d("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
       "Bytes of metadata records after which a new metadata snapshot is written.", 1),
    _d("metadata.log.max.snapshot.interval.ms", "long", 3600000,
       "Longest time between metadata snapshots (0: no time limit).", 0),
    _d("metadata.max.idle.interval.ms", "int", 500,
       "How often the active controller writes a no-op record when idle (0: never).", 0),
    _d("cluster.id", "string", None, "Cluster id; generated and stored in meta.properties."),
]

_REPLICATION = [
    _d("default.replication.factor", "int", 1, "Replication factor of auto-created topics."),
    _d("min.insync.replicas", "int", 1, "Default min.insync.replicas.", 1),
    _d("offsets.topic.replication.factor", "int", 3,
       "Replication of __consumer_offsets.", 1),
    _d("transaction.state.log.replication.factor", "int", 3,
       "Replication of __transaction_state.", 1),
    _d("auto.leader.rebalance.enable", "boolean", True,
       "Move leadership back to the preferred replicas when too few of them lead."),
    _d("leader.imbalance.check.interval.seconds", "long", 300,
       "How often the controller checks leadership balance.", 1),
    _d("leader.imbalance.per.broker.percentage", "int", 10,
       "Share of a broker's partitions led by others that triggers a rebalance."),
    _d("unclean.leader.election.enable", "boolean", False,
       "Let a replica outside the ISR become leader when no ISR member is left (data loss)."),
    _d("num.replica.fetchers", "int", 1,
       "Fetchers (connections) a follower runs per source broker; partitions spread by hash.",
       1),
    _d("replica.fetch.max.bytes", "int", 1048576,
       "Bytes a follower asks for per partition in one fetch (a larger first batch still "
       "comes whole).", 0),
    _d("replica.fetch.response.max.bytes", "int", 10485760,
       "Bytes a follower asks for per fetch in all.", 0),
    _d("replica.fetch.wait.max.ms", "int", 500,
       "How long a follower's fetch waits at the leader for new data.", 0),
    _d("replica.fetch.min.bytes", "int", 1, "Bytes a follower's fetch waits for.", 1),
    _d("replica.fetch.backoff.ms", "int", 1000,
       "Wait before a follower retries a leader that failed to answer.", 0),
    _d("replica.socket.timeout.ms", "int", 30000,
       "How long a follower waits for a fetch response beyond replica.fetch.wait.max.ms.", 1),
    _d("replica.lag.time.max.ms", "long", 30000,
       "A follower not caught up with the leader for this long leaves the ISR.", 1),
]

_LOG = [
    _d("log.dirs", "string", None, "The data directories (the first one holds the logs)."),
    _d("log.dir", "string", None, "Alias of log.dirs."),
    _d("num.partitions", "int", 1, "Partitions of an auto-created topic.", 1),
    _d("auto.create.topics.enable", "boolean", True,
       "Create a topic when a client asks for its metadata or produces to it."),
    _d("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    _d("message.max.bytes", "int", 1048588, "Largest record batch the broker accepts.", 0),
    _d("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", 1024),
    _d("log.segment.bytes", "int", 1073741824, "Default segment.bytes.", 14),
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
    _d("log.flush.interval.messages", "long", MAX_LONG,
       "Default flush.messages (default: leave flushing to the OS page cache)."),
    _d("log.flush.interval.ms", "long", None, "Default flush.ms."),
    _d("log.flush.scheduler.interval.ms", "long", MAX_LONG,
       "How often logs are checked for a due flush.ms."),
    _d("log.flush.offset.checkpoint.interval.ms", "int", 60000,
       "How often recovery points are checkpointed."),
    _d("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
       "How often log start offsets are checkpointed."),
    _d("log.message.timestamp.type", "string", "CreateTime", "Default message.timestamp.type."),
    _d("log.message.timestamp.before.max.ms", "long", MAX_LONG,
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
    _d("log.cleaner.max.compaction.lag.ms", "long", MAX_LONG, "Default max.compaction.lag.ms."),
    _d("compression.type", "string", "producer", "Default compression.type."),
]

_COORDINATORS = [
    _d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", 1),
    _d("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of __consumer_offsets."),
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
       "Partitions of __transaction_state.", 1),
    _d("transaction.state.log.segment.bytes", "int", 104857600,
       "segment.bytes of __transaction_state."),
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

DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d for d in [*_NODE, *_REPLICATION, *_LOG, *_COORDINATORS]}

# Kafka settings with no meaning here, accepted so that a Kafka server.properties file loads:
# whole families by prefix, and by name those of the families whose other names are used (so a
# misspelt `controller.quorum.voters` is an error, not a node running alone).
IGNORED_PREFIXES = (
    "zookeeper.", "inter.broker.", "num.network.threads", "num.io.threads",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "group.coordinator.", "share.",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "replica.",
    "transaction.state.log.min.isr", "confluent.", "ssl.", "sasl.",
)
IGNORED_NAMES = frozenset({
    "controller.quorum.append.linger.ms", "controller.quorum.bootstrap.servers",
    "controller.quota.window.num",
    "controller.quota.window.size.seconds", "metadata.log.segment.bytes",
    "metadata.log.segment.min.bytes", "metadata.log.segment.ms", "metadata.max.retention.bytes",
    "metadata.max.retention.ms", "initial.broker.registration.timeout.ms",
})


def ignored(key: str) -> bool:
    """Whether `key` is a Kafka setting accepted and ignored here."""
    return key in IGNORED_NAMES or key.startswith(IGNORED_PREFIXES)


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
