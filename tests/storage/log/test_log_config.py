from __future__ import annotations

import dataclasses

import pytest

from spark_log.records.batch_header import TimestampType
from spark_log.storage.errors import InvalidConfigurationError
from spark_log.storage.log.log_config import (
    BY_NAME,
    DEFAULT_CONFIG,
    DEFINITIONS,
    LONG_MAX,
    ConfigType,
    LogConfig,
    public_definitions,
)


def test_defaults_are_kafkas() -> None:
    props = DEFAULT_CONFIG.to_properties()
    assert props["segment.bytes"] == str(1 << 30)
    assert props["segment.ms"] == str(7 * 24 * 3600 * 1000)
    assert props["segment.index.bytes"] == str(10 << 20)
    assert props["index.interval.bytes"] == "4096"
    assert props["flush.messages"] == props["flush.ms"] == str(LONG_MAX)
    assert props["retention.ms"] == str(604_800_000)
    assert props["retention.bytes"] == "-1"
    assert props["cleanup.policy"] == "delete"
    assert props["max.message.bytes"] == "1048588"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["message.timestamp.after.max.ms"] == "3600000"
    assert props["min.cleanable.dirty.ratio"] == "0.5"
    assert props["preallocate"] == "false"
    assert props["compression.type"] == "producer"
    assert "internal.segment.bytes" not in props


def test_every_definition_matches_a_field_default() -> None:
    for d in DEFINITIONS:
        assert getattr(DEFAULT_CONFIG, d.attr) == d.default, d.name


def test_public_definitions_leave_out_internal_ones_and_are_sorted() -> None:
    names = [d.name for d in public_definitions()]
    assert "internal.segment.bytes" not in names
    assert names == sorted(names)
    assert BY_NAME["cleanup.policy"].type is ConfigType.LIST
    assert BY_NAME["segment.bytes"].valid_values == "[1048576,...]"


def test_from_properties_parses_each_type() -> None:
    c = LogConfig.from_properties({
        "cleanup.policy": "compact, delete", "preallocate": " TRUE ",
        "min.cleanable.dirty.ratio": "0.25", "retention.ms": "-1",
        "message.timestamp.type": "LogAppendTime", "segment.bytes": "+2097152"})
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.preallocate is True
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.retention_ms == -1
    assert c.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert c.segment_bytes == 2 * 1024 * 1024
    assert c.overridden == {"cleanup.policy", "preallocate", "min.cleanable.dirty.ratio",
                            "retention.ms", "message.timestamp.type", "segment.bytes"}


def test_from_properties_applies_over_a_base() -> None:
    base = LogConfig.from_properties({"retention.ms": "1000"})
    c = LogConfig.from_properties({"retention.bytes": "5"}, base=base)
    assert (c.retention_ms, c.retention_bytes) == (1000, 5)
    assert c.overridden == {"retention.bytes"}


@pytest.mark.parametrize("key,value,reason", [
    ("segment.bytes", "1000", "at least 1048576"),
    ("segment.bytes", "abc", "Not a number of type INT"),
    ("segment.bytes", "2147483648", "Not a number of type INT"),
    ("retention.ms", "-2", "at least -1"),
    ("retention.ms", "1_000", "Not a number"),
    ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
    ("min.cleanable.dirty.ratio", "nan", "DOUBLE"),
    ("preallocate", "yes", "true or false"),
    ("cleanup.policy", "compact,remove", "must be one of"),
    ("cleanup.policy", "", "must not be empty"),
    ("message.timestamp.type", "createtime", "one of"),
    ("compression.type", "brotli", "one of"),
    ("compression.gzip.level", "0", "between 1 and 9"),
    ("leader.replication.throttled.replicas", "0:1,x", "partitionId:brokerId"),
])
def test_invalid_values_name_the_key(key: str, value: str, reason: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=reason) as e:
        LogConfig.from_properties({key: value})
    assert e.value.config_name == key
    assert key in str(e.value)


def test_unknown_key_is_rejected_by_name() -> None:
    with pytest.raises(InvalidConfigurationError,
                       match=r"Unknown topic config name: segment\.size"):
        LogConfig.from_properties({"segment.size": "1"})


def test_compaction_lags_must_be_ordered() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"min\.compaction\.lag\.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": "10",
                                   "max.compaction.lag.ms": "5"})


def test_direct_construction_and_replace_validate_too() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"segment\.ms"):
        LogConfig(segment_ms=0)
    with pytest.raises(InvalidConfigurationError, match="preallocate"):
        dataclasses.replace(DEFAULT_CONFIG, preallocate=1)  # type: ignore[arg-type]


def test_round_trip_through_properties() -> None:
    c = LogConfig.from_properties({"cleanup.policy": "compact,delete", "flush.ms": "10",
                                   "internal.segment.bytes": "4096",
                                   "follower.replication.throttled.replicas": "0:1,1:2"})
    again = LogConfig.from_properties(c.to_properties())
    assert dataclasses.replace(again, overridden=frozenset()) == \
        dataclasses.replace(c, overridden=frozenset())


def test_derived_values() -> None:
    c = LogConfig.from_properties({"internal.segment.bytes": "4096", "preallocate": "true",
                                   "cleanup.policy": "compact",
                                   "max.compaction.lag.ms": "1000"})
    assert c.segment_size == c.init_file_size == 4096
    assert c.max_segment_ms == 1000
    assert DEFAULT_CONFIG.segment_size == 1 << 30 and DEFAULT_CONFIG.init_file_size == 0
    assert DEFAULT_CONFIG.max_segment_ms == DEFAULT_CONFIG.segment_ms
    assert DEFAULT_CONFIG.value_of("retention.bytes") == -1
