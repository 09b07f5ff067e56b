"""Topic-level log configuration: Kafka's topic config names, types, defaults and validation.

`DEFINITIONS` is the table the broker serves through DescribeConfigs (name, type, default, valid
values, a doc line); `LogConfig` is the frozen, typed value storage reads. Names, types, defaults
and ranges follow Kafka 4.x (e.g. segment.bytes >= 1 MiB, message.timestamp.after.max.ms = 1 h).
`internal.segment.bytes` is Kafka's internal override for tests (smaller segments); it is not
listed by `public_definitions()`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from spark_log.records.batch_header import TimestampType
from spark_log.storage.errors import InvalidConfigurationError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_INT_RANGES = {"INT": (-(2**31), INT_MAX), "LONG": (-(2**63), LONG_MAX)}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_THROTTLED = re.compile(r"\*|([0-9]+:[0-9]+)")


class ConfigType(IntEnum):
    """DescribeConfigs' configType numbers."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


Validator = Callable[[Any], str | None]  # returns the reason a value is invalid, or None


@dataclass(frozen=True)
class ConfigDefinition:
    name: str
    type: ConfigType
    default: Any  # the typed value (tuple for LIST, None for "no default")
    valid_values: str  # as Kafka's docs print it, "" when anything goes
    doc: str
    validator: Validator | None = None
    internal: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def at_least(low: int) -> tuple[str, Validator]:
    return f"[{low},...]", lambda v: None if v >= low else f"Value must be at least {low}"


def between(low: float, high: float) -> tuple[str, Validator]:
    def check(v: float) -> str | None:
        return None if low <= v <= high else f"Value must be no more than {high}" if v > high \
            else f"Value must be at least {low}"
    return f"[{low},...,{high}]", check


def one_of(*choices: str) -> tuple[str, Validator]:
    return (f"[{', '.join(choices)}]",
            lambda v: None if v in choices else f"String must be one of: {', '.join(choices)}")


def list_of(*choices: str) -> tuple[str, Validator]:
    def check(items: tuple[str, ...]) -> str | None:
        if not items:
            return "The list must not be empty"
        bad = [i for i in items if i not in choices]
        return f"Invalid value {bad[0]}, must be one of: {', '.join(choices)}" if bad else None
    return f"[{', '.join(choices)}]", check


def _level(low: int, high: int, or_value: int | None = None) -> tuple[str, Validator]:
    def check(v: int) -> str | None:
        if low <= v <= high or v == or_value:
            return None
        extra = f" or equal to {or_value}" if or_value is not None else ""
        return f"Value must be between {low} and {high}{extra}"
    return (f"[{low},...,{high}]" + (f" or {or_value}" if or_value is not None else "")), check


def _throttled(items: tuple[str, ...]) -> str | None:
    if items == ("*",) or all(_THROTTLED.fullmatch(i) and i != "*" for i in items):
        return None
    return "Value must be '*' or a list of partitionId:brokerId pairs"


def _d(name: str, type_: ConfigType, default: Any, doc: str,
       rule: tuple[str, Validator] | None = None, *, internal: bool = False) -> ConfigDefinition:
    valid, check = rule if rule else ("", None)
    return ConfigDefinition(name, type_, default, valid, doc, check, internal)


B, S, INT, L, D, LST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                        ConfigType.DOUBLE, ConfigType.LIST)
_WEEK_MS = 7 * 24 * 3600 * 1000

DEFINITIONS: tuple[ConfigDefinition, ...] = (
    _d("cleanup.policy", LST, ("delete",), "How old log segments go away: 'delete' removes them "
       "by retention.ms/retention.bytes, 'compact' keeps the latest record per key.",
       list_of("compact", "delete")),
    _d("compression.gzip.level", INT, -1, "Compression level when compression.type is gzip.",
       _level(1, 9, -1)),
    _d("compression.lz4.level", INT, 9, "Compression level when compression.type is lz4.",
       _level(1, 17)),
    _d("compression.type", S, "producer", "Codec the broker stores batches with; 'producer' "
       "keeps whatever codec the producer used.",
       one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _d("compression.zstd.level", INT, 3, "Compression level when compression.type is zstd.",
       _level(-131072, 22)),
    _d("delete.retention.ms", L, 86_400_000, "How long delete tombstones stay readable in a "
       "compacted topic.", at_least(0)),
    _d("file.delete.delay.ms", L, 60_000, "How long a segment renamed to .deleted waits before "
       "its files are removed.", at_least(0)),
    _d("flush.messages", L, LONG_MAX, "Force an fsync after this many messages; by default the "
       "page cache and replication provide durability.", at_least(1)),
    _d("flush.ms", L, LONG_MAX, "Force an fsync when the oldest unflushed message is this old "
       "(milliseconds); by default never.", at_least(0)),
    _d("follower.replication.throttled.replicas", LST, (), "Replicas whose follower "
       "replication is throttled: partitionId:brokerId pairs or '*'.", ("", _throttled)),
    _d("index.interval.bytes", INT, 4096, "Bytes of log between two offset index entries.",
       at_least(0)),
    _d("leader.replication.throttled.replicas", LST, (), "Replicas whose leader replication "
       "is throttled: partitionId:brokerId pairs or '*'.", ("", _throttled)),
    _d("local.retention.bytes", L, -2, "Local size limit when tiered storage is on; -2 means "
       "retention.bytes.", at_least(-2)),
    _d("local.retention.ms", L, -2, "Local time limit when tiered storage is on; -2 means "
       "retention.ms.", at_least(-2)),
    _d("max.compaction.lag.ms", L, LONG_MAX, "Longest time a record may stay uncompacted.",
       at_least(1)),
    _d("max.message.bytes", INT, 1_048_588, "Largest record batch the topic accepts, in bytes "
       "(batch header and log overhead included).", at_least(0)),
    _d("message.timestamp.after.max.ms", L, 3_600_000, "How far ahead of the broker's clock a "
       "CreateTime timestamp may be.", at_least(0)),
    _d("message.timestamp.before.max.ms", L, LONG_MAX, "How far behind the broker's clock a "
       "CreateTime timestamp may be.", at_least(0)),
    _d("message.timestamp.type", S, "CreateTime", "Whether record timestamps are the producer's "
       "(CreateTime) or the broker's at append (LogAppendTime).",
       one_of("CreateTime", "LogAppendTime")),
    _d("min.cleanable.dirty.ratio", D, 0.5, "Share of uncompacted log that makes the cleaner "
       "compact a partition.", between(0, 1)),
    _d("min.compaction.lag.ms", L, 0, "Shortest time a record stays uncompacted.", at_least(0)),
    _d("min.insync.replicas", INT, 1, "In-sync replicas an acks=all produce needs.", at_least(1)),
    _d("preallocate", B, False, "Allocate the full segment size when a segment is created.",),
    _d("remote.log.copy.disable", B, False, "Stop copying segments to tiered storage."),
    _d("remote.log.delete.on.disable", B, False, "Delete tiered data when tiering is turned off."),
    _d("remote.storage.enable", B, False, "Tier old segments to remote storage."),
    _d("retention.bytes", L, -1, "Largest size a partition grows to before its oldest "
       "segments are deleted; -1 means no limit."),
    _d("retention.ms", L, _WEEK_MS, "How long a segment is kept after its newest record; -1 "
       "means forever.", at_least(-1)),
    _d("segment.bytes", INT, 1 << 30, "Size at which a segment is rolled.", at_least(1 << 20)),
    _d("segment.index.bytes", INT, 10 << 20, "Size of a segment's offset and time index files.",
       at_least(4)),
    _d("segment.jitter.ms", L, 0, "Most random time subtracted from segment.ms, so segments do "
       "not all roll at once.", at_least(0)),
    _d("segment.ms", L, _WEEK_MS, "Age of a segment's first record at which it is rolled.",
       at_least(1)),
    _d("unclean.leader.election.enable", B, False, "Let an out-of-sync replica become leader."),
    _d("internal.segment.bytes", INT, None, "Overrides segment.bytes below its minimum; for "
       "tests only.", at_least(0), internal=True),
)
BY_NAME: dict[str, ConfigDefinition] = {d.name: d for d in DEFINITIONS}


def public_definitions() -> tuple[ConfigDefinition, ...]:
    """The definitions DescribeConfigs lists (internal ones left out), sorted by name."""
    return tuple(d for d in DEFINITIONS if not d.internal)


def parse_value(definition: ConfigDefinition, raw: str) -> Any:
    """Parse a property string as Kafka's ConfigDef does (trimmed; lists split on commas)."""
    text = raw.strip()
    name = definition.name
    t = definition.type
    if t is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return text.lower() == "true"
    if t in (ConfigType.INT, ConfigType.LONG):
        if not _INTEGER.fullmatch(text):
            raise _invalid(name, raw, f"Not a number of type {t.name}")
        value = int(text)
        low, high = _INT_RANGES[t.name]
        if not low <= value <= high:
            raise _invalid(name, raw, f"Not a number of type {t.name}")
        return value
    if t is ConfigType.DOUBLE:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or "_" in text:
            raise _invalid(name, raw, "Not a number of type DOUBLE")
        return value
    if t is ConfigType.LIST:
        return tuple(re.split(r"\s*,\s*", text)) if text else ()
    return text


def format_value(definition: ConfigDefinition, value: Any) -> str | None:
    """The property string Kafka shows for a typed value (None for an unset value)."""
    if value is None:
        return None
    if definition.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if definition.type is ConfigType.LIST:
        return ",".join(value)
    return str(value)


def _invalid(name: str, raw: object, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(
        f"Invalid value {raw} for configuration {name}: {reason}", name)


@dataclass(frozen=True)
class LogConfig:
    """A topic's effective log configuration: every field is one Kafka topic config.

    Invariant: every value has its definition's type and passes its validator (checked on
    construction, also by `dataclasses.replace`). `overridden` names the keys set explicitly
    by the `from_properties` call that built it (DescribeConfigs' TOPIC_CONFIG source).
    Immutable, so safe to share between threads and logs.
    """

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_type: str = "producer"
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_after_max_ms: int = 3_600_000
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = _WEEK_MS
    segment_bytes: int = 1 << 30
    segment_index_bytes: int = 10 << 20
    segment_jitter_ms: int = 0
    segment_ms: int = _WEEK_MS
    unclean_leader_election_enable: bool = False
    internal_segment_bytes: int | None = None
    overridden: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for d in DEFINITIONS:
            value = getattr(self, d.attr)
            if value is None and d.default is None:
                continue
            _check_type(d, value)
            reason = d.validator(value) if d.validator else None
            if reason:
                raise _invalid(d.name, format_value(d, value), reason)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigurationError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})", "min.compaction.lag.ms")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """`base` (default: Kafka's defaults) with `props` applied; raises InvalidConfigurationError
        naming the key for an unknown name or a value that does not parse or validate."""
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            definition = BY_NAME.get(name)
            if definition is None:
                raise InvalidConfigurationError(f"Unknown topic config name: {name}", name)
            if not isinstance(raw, str):
                raise _invalid(name, raw, "Expected a string")
            changes[definition.attr] = parse_value(definition, raw)
        return dataclasses.replace(base or DEFAULT_CONFIG, overridden=frozenset(props), **changes)

    def to_properties(self, *, include_unset: bool = False) -> dict[str, str]:
        """Every config as Kafka prints it (unset internal ones left out unless asked)."""
        out: dict[str, str] = {}
        for d in DEFINITIONS:
            text = format_value(d, getattr(self, d.attr))
            if text is not None or include_unset:
                out[d.name] = text if text is not None else ""
        return out

    def value_of(self, name: str) -> Any:
        return getattr(self, BY_NAME[name].attr)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def segment_size(self) -> int:
        """The roll size in bytes: internal.segment.bytes when set, else segment.bytes."""
        return self.internal_segment_bytes if self.internal_segment_bytes is not None \
            else self.segment_bytes

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, tightened to max.compaction.lag.ms on compacted topics (as Kafka)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.message_timestamp_type == "LogAppendTime" \
            else TimestampType.CREATE_TIME

    @property
    def init_file_size(self) -> int:
        return self.segment_size if self.preallocate else 0


def _check_type(d: ConfigDefinition, value: Any) -> None:
    expected: type | tuple[type, ...] = {
        ConfigType.BOOLEAN: bool, ConfigType.STRING: str, ConfigType.INT: int,
        ConfigType.LONG: int, ConfigType.DOUBLE: (int, float), ConfigType.LIST: tuple,
    }[d.type]
    ok = isinstance(value, expected) and not (d.type is not ConfigType.BOOLEAN
                                              and isinstance(value, bool))
    if ok and d.type in (ConfigType.INT, ConfigType.LONG):
        low, high = _INT_RANGES[d.type.name]
        ok = low <= value <= high
    if ok and d.type is ConfigType.LIST:
        ok = all(isinstance(i, str) for i in value)
    if not ok:
        raise _invalid(d.name, value, f"Expected a value of type {d.type.name}")


DEFAULT_CONFIG = LogConfig()
