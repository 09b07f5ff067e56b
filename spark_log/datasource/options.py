"""Parsing and validation of pylog's options, under Spark's Kafka source and sink names.

Spark passes options lower-cased; every check here runs on the driver when a reader or writer is
created, so a mistake fails before any job starts, with a message naming the option. `kafka.*`
options go to the Kafka client (librdkafka) with the prefix removed, as Spark passes them to its
Java client; `bootstrap.servers` is accepted as an alias of `kafka.bootstrap.servers`. Without a
bootstrap address, pylog uses the embedded sidecar broker of `dataDir` (see `spark_log.sidecar`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .avro_options import AVRO_OPTIONS, AvroOptions, parse_avro
from .errors import PylogOptionError
from .offsets import (
    EarliestSpec,
    GroupSpec,
    LatestSpec,
    OffsetSpecT,
    OffsetsSpec,
    TimestampSpec,
    TimestampsSpec,
    TopicPartition,
    parse_offsets_option,
    parse_partition_json,
    parse_timestamp_option,
    parse_timestamps_option,
)
from .option_values import get_option, parse_bool, parse_duration_ms, parse_positive_int
from .txn_options import TXN_OPTIONS, TxnOptions, parse_txn_options

# Spark's Kafka source options (their user-facing spelling; Spark lower-cases keys).
STRATEGIES = ("assign", "subscribe", "subscribePattern")
SPARK_SOURCE_OPTIONS = (
    *STRATEGIES, "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition",
    "groupIdPrefix", "includeHeaders",
)
SPARK_SINK_OPTIONS = ("topic", "includeHeaders")
# What pylog adds.
CLIENT_OPTIONS = ("bootstrap.servers", "dataDir", "clientTimeoutMs")
PYLOG_SOURCE_OPTIONS = ("groupId", "commitOffsets", "maxBytesPerTrigger", "directFetch")
# Keys Spark itself may pass along with the user's options.
SPARK_INTERNAL = ("path", "checkpointLocation", "queryName")

# Kafka settings the source decides itself (Spark refuses the same ones).
UNSUPPORTED_CONSUMER = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' "
                         "to choose where to start",
    "enable.auto.commit": "the source commits the offsets of each finished micro-batch itself "
                          "(options 'groupId' and 'commitOffsets')",
    "key.deserializer": "keys are read as binary; deserialize them with DataFrame operations "
                        "(or keyFormat=avro)",
    "value.deserializer": "values are read as binary; deserialize them with DataFrame "
                          "operations (or valueFormat=avro)",
    "interceptor.classes": "Java interceptors do not apply to this client",
}
UNSUPPORTED_PRODUCER = {
    "key.serializer": "keys are written as binary or UTF-8 strings; serialize them with "
                      "DataFrame operations (or keyFormat=avro)",
    "value.serializer": "values are written as binary or UTF-8 strings; serialize them with "
                        "DataFrame operations (or valueFormat=avro)",
    "interceptor.classes": "Java interceptors do not apply to this client",
}

DEFAULT_CLIENT_TIMEOUT_MS = 30_000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"


def _lookup(names: tuple[str, ...]) -> dict[str, str]:
    return {name.lower(): name for name in names}


SOURCE_NAMES = _lookup((*SPARK_SOURCE_OPTIONS, *CLIENT_OPTIONS, *AVRO_OPTIONS,
                        *PYLOG_SOURCE_OPTIONS, *SPARK_INTERNAL))
SINK_NAMES = _lookup((*SPARK_SINK_OPTIONS, *CLIENT_OPTIONS, *AVRO_OPTIONS, *SPARK_INTERNAL,
                      *TXN_OPTIONS))


@dataclass(frozen=True)
class ClientOptions:
    """Where the cluster is and how to talk to it. Invariant: `kafka_conf` keys are librdkafka
    property names (no `kafka.` prefix); `bootstrap` is None only when the sidecar is meant."""

    bootstrap: str | None
    kafka_conf: Mapping[str, str]
    data_dir: str | None
    timeout_ms: int = DEFAULT_CLIENT_TIMEOUT_MS


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of Spark's three strategies."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignments: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assignments)


@dataclass(frozen=True)
class SourceOptions:
    """Every read option, validated. Invariant: exactly one subscription strategy; ending specs
    are None for streaming queries; limits are positive when set."""

    subscription: Subscription
    client: ClientOptions
    avro: AvroOptions
    starting: OffsetSpecT
    ending: OffsetSpecT | None
    starting_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes_per_trigger: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_retries: int = 3
    fetch_retry_interval_ms: int = 1000
    group_id: str | None = None
    group_id_prefix: str = DEFAULT_GROUP_ID_PREFIX
    commit_offsets: bool = True
    publish_planned: bool = False  # commitOffsets=transactional (see planned_offsets)
    direct_fetch: bool = True
    raw: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    """Every write option, validated. `topic` overrides a topic column, as in Spark."""

    client: ClientOptions
    avro: AvroOptions
    topic: str | None = None
    include_headers: bool = False
    txn: TxnOptions = field(default_factory=lambda: TxnOptions(False))


# ---- helpers ------------------------------------------------------------------------------


def _check_known(options: Mapping[str, str], names: dict[str, str], what: str) -> None:
    for key in options:
        low = key.lower()
        if low in names or low.startswith("kafka."):
            continue
        close = difflib.get_close_matches(low, list(names), n=1, cutoff=0.75)
        hint = f" Did you mean '{names[close[0]]}'?" if close else ""
        raise PylogOptionError(
            f"Unknown option '{key}' for the pylog {what}.{hint} Kafka client settings take "
            f"the 'kafka.' prefix (e.g. kafka.bootstrap.servers); see docs/pylog.md for the "
            "options."
        )


def parse_client(options: Mapping[str, str], unsupported: Mapping[str, str]) -> ClientOptions:
    conf: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if not low.startswith("kafka."):
            continue
        prop = low[len("kafka."):]
        if prop in unsupported:
            raise PylogOptionError(
                f"Kafka option 'kafka.{prop}' is not supported: {unsupported[prop]}.")
        conf[prop] = str(value)
    alias = get_option(options, "bootstrap.servers")
    if alias is not None and "bootstrap.servers" in conf and alias != conf["bootstrap.servers"]:
        raise PylogOptionError(
            "Options 'bootstrap.servers' and 'kafka.bootstrap.servers' name different clusters; "
            "give only one of them.")
    bootstrap = conf.pop("bootstrap.servers", None) or alias
    if bootstrap is not None and not bootstrap.strip():
        raise PylogOptionError("Option 'kafka.bootstrap.servers' is empty: give host:port[,...]")
    timeout = parse_positive_int(options, "clientTimeoutMs") or DEFAULT_CLIENT_TIMEOUT_MS
    return ClientOptions(bootstrap, conf, get_option(options, "dataDir"), timeout)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in STRATEGIES if get_option(options, name) is not None]
    listed = ", ".join(STRATEGIES)
    if not given:
        raise PylogOptionError(
            f"One of the following options must be specified for the pylog source: {listed}.")
    if len(given) > 1:
        raise PylogOptionError(
            "Only one of the following options can be specified for the pylog source: "
            f"{listed} (got {', '.join(given)}).")
    kind = given[0]
    value = get_option(options, kind) or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise PylogOptionError(
                f"No topics to subscribe to: option 'subscribe' is {value!r}; give a "
                "comma-separated list of topics.")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        if not value.strip():
            raise PylogOptionError("Pattern to subscribe is empty: option 'subscribePattern'.")
        try:
            re.compile(value.strip())
        except re.error as e:
            raise PylogOptionError(
                f"Option 'subscribePattern' is not a valid regular expression ({e}): "
                f"{value!r}") from None
        return Subscription(kind, pattern=value.strip())
    return Subscription(kind, assignments=_parse_assign(value))


def _parse_assign(value: str) -> tuple[TopicPartition, ...]:
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    import json

    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise PylogOptionError(
            f"Option 'assign' must be a JSON object of topics to partition lists, e.g. "
            f"{example}, got {value!r}")
    result: list[TopicPartition] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise PylogOptionError(
                f"Option 'assign': topic {topic!r} must map to a list of partition numbers, "
                f"e.g. {example}, got {json.dumps(parts)}")
        result.extend((topic, p) for p in parts)
    return tuple(sorted(set(result)))


def _timestamp_or_offsets(options: Mapping[str, str], prefix: str, *, streaming: bool,
                          default: OffsetSpecT | None) -> OffsetSpecT | None:
    """Spark's precedence: global timestamp, then per-partition timestamps, then offsets."""
    stamp = get_option(options, f"{prefix}Timestamp")
    if stamp is not None:
        return parse_timestamp_option(stamp, f"{prefix}Timestamp")
    stamps = get_option(options, f"{prefix}OffsetsByTimestamp")
    if stamps is not None:
        return parse_timestamps_option(stamps, f"{prefix}OffsetsByTimestamp")
    offsets = get_option(options, f"{prefix}Offsets")
    if offsets is not None:
        return parse_offsets_option(offsets, f"{prefix}Offsets", batch_end=prefix == "ending")
    return default


def _check_batch_bounds(starting: OffsetSpecT, ending: OffsetSpecT | None) -> None:
    if isinstance(starting, LatestSpec):
        raise PylogOptionError(
            "Option 'startingOffsets': starting offset can't be latest for batch queries.")
    if isinstance(starting, OffsetsSpec):
        for (topic, part), off in starting.offsets.items():
            if off == -1:
                raise PylogOptionError(
                    f"Option 'startingOffsets': starting offset for {topic}-{part} can't be "
                    "latest (-1) for batch queries.")
    if isinstance(ending, EarliestSpec):
        raise PylogOptionError(
            "Option 'endingOffsets': ending offset can't be earliest for batch queries.")
    if isinstance(ending, OffsetsSpec):
        for (topic, part), off in ending.offsets.items():
            if off == -2:
                raise PylogOptionError(
                    f"Option 'endingOffsets': ending offset for {topic}-{part} can't be "
                    "earliest (-2) for batch queries.")


def _check_assigned(spec: OffsetSpecT | None, sub: Subscription, option: str) -> None:
    """With assign, offsets JSON must cover exactly the assigned partitions (as in Spark)."""
    if sub.kind != "assign" or not isinstance(spec, OffsetsSpec | TimestampsSpec):
        return
    given = set(spec.offsets if isinstance(spec, OffsetsSpec) else spec.timestamps)
    missing = sorted(set(sub.assignments) - given)
    if missing:
        raise PylogOptionError(
            f"Option '{option}' does not cover the assigned partitions "
            f"{', '.join(f'{t}-{p}' for t, p in missing)}: give a value for every partition "
            "in 'assign'.")


def _parse_bounds(options: Mapping[str, str], subscription: Subscription, streaming: bool
                  ) -> tuple[OffsetSpecT, OffsetSpecT | None, str]:
    """(starting, ending, startingOffsetsByTimestampStrategy), checked like Spark does."""
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if get_option(options, name) is not None:
                raise PylogOptionError(
                    f"Option '{name}' is not valid in streaming queries: a stream has no end "
                    "(use Trigger.AvailableNow to stop at the offsets available at start).")
        ending = None
    else:
        ending = _timestamp_or_offsets(options, "ending", streaming=False, default=LatestSpec())
    starting = _timestamp_or_offsets(
        options, "starting", streaming=streaming,
        default=LatestSpec() if streaming else EarliestSpec())
    assert starting is not None
    if not streaming:
        _check_batch_bounds(starting, ending)
    _check_assigned(starting, subscription, "startingOffsets")
    _check_assigned(ending, subscription, "endingOffsets")
    strategy = (get_option(options, "startingOffsetsByTimestampStrategy")
                or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise PylogOptionError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
            f"{strategy!r}")
    return starting, ending, strategy


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate read options; raises PylogOptionError naming the offending option."""
    _check_known(options, SOURCE_NAMES, "source")
    subscription = parse_subscription(options)
    client = parse_client(options, UNSUPPORTED_CONSUMER)
    starting, ending, strategy = _parse_bounds(options, subscription, streaming)
    return SourceOptions(
        subscription=subscription,
        client=client,
        avro=parse_avro(options),
        starting=starting,
        ending=ending,
        starting_strategy=strategy,
        fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
        include_headers=parse_bool(options, "includeHeaders", False),
        min_partitions=parse_positive_int(options, "minPartitions"),
        max_records_per_partition=parse_positive_int(options, "maxRecordsPerPartition"),
        max_offsets_per_trigger=parse_positive_int(options, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=parse_positive_int(options, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=parse_duration_ms(options, "maxTriggerDelay",
                                               DEFAULT_MAX_TRIGGER_DELAY_MS),
        max_bytes_per_trigger=parse_positive_int(options, "maxBytesPerTrigger"),
        poll_timeout_ms=parse_positive_int(options, "kafkaConsumer.pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        fetch_retries=_nonneg(options, "fetchOffset.numRetries", 3),
        fetch_retry_interval_ms=_nonneg(options, "fetchOffset.retryIntervalMs", 1000),
        group_id=_group_id(options, client),
        group_id_prefix=get_option(options, "groupIdPrefix") or DEFAULT_GROUP_ID_PREFIX,
        commit_offsets=_commit_mode(options) == "true",
        publish_planned=_commit_mode(options) == "transactional",
        direct_fetch=parse_bool(options, "directFetch", True),
        raw={k.lower(): str(v) for k, v in options.items()},
    )


def _commit_mode(options: Mapping[str, str]) -> str:
    """commitOffsets: 'true' (monitoring commits), 'false', or 'transactional' (a pylog sink
    with sourceGroupId commits them in its transactions; needs an explicit groupId)."""
    mode = (get_option(options, "commitOffsets") or "true").strip().lower()
    if mode not in ("true", "false", "transactional"):
        raise PylogOptionError(
            f"Option 'commitOffsets' must be 'true', 'false' or 'transactional', got {mode!r}")
    if mode == "transactional" and get_option(options, "groupId") is None and \
            get_option(options, "kafka.group.id") is None:
        raise PylogOptionError(
            "Option 'commitOffsets' is 'transactional': give the group with 'groupId' (and the "
            "same group as the sink's 'sourceGroupId').")
    return mode


def _nonneg(options: Mapping[str, str], name: str, default: int) -> int:
    value = parse_positive_int(options, name, minimum=0)
    return default if value is None else value


def _group_id(options: Mapping[str, str], client: ClientOptions) -> str | None:
    group = get_option(options, "groupId")
    from_kafka = client.kafka_conf.get("group.id")
    if group is not None and from_kafka is not None and group != from_kafka:
        raise PylogOptionError(
            "Options 'groupId' and 'kafka.group.id' differ; give only one of them.")
    return group or from_kafka


def parse_sink_options(options: Mapping[str, str], *, streaming: bool = False) -> SinkOptions:
    """Validate write options; raises PylogOptionError naming the offending option."""
    _check_known(options, SINK_NAMES, "sink")
    topic = get_option(options, "topic")
    if topic is not None and not topic.strip():
        raise PylogOptionError("Option 'topic' is empty.")
    client = parse_client(options, UNSUPPORTED_PRODUCER)
    return SinkOptions(
        client=client,
        avro=parse_avro(options),
        topic=topic.strip() if topic else None,
        include_headers=parse_bool(options, "includeHeaders", False),
        txn=parse_txn_options(options, client.kafka_conf, streaming=streaming),
    )


__all__ = [
    "AvroOptions",
    "ClientOptions",
    "EarliestSpec",
    "GroupSpec",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "TimestampSpec",
    "TimestampsSpec",
    "parse_partition_json",
    "parse_sink_options",
    "parse_source_options",
]
