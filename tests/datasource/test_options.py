"""Option parsing and validation: Spark's names, defaults and messages, pylog's additions."""

from __future__ import annotations

import pytest

from spark_log.datasource.errors import PylogOptionError
from spark_log.datasource.offsets import (
    EarliestSpec,
    GroupSpec,
    LatestSpec,
    OffsetsSpec,
    TimestampSpec,
    TimestampsSpec,
)
from spark_log.datasource.options import parse_sink_options, parse_source_options


def opts(**kw: str) -> dict[str, str]:
    """Options as Spark hands them over: keys lower-cased."""
    return {k.replace("__", ".").lower(): v for k, v in kw.items()}


def test_defaults_match_spark_for_batch_and_streaming() -> None:
    batch = parse_source_options(opts(subscribe="a"), streaming=False)
    assert isinstance(batch.starting, EarliestSpec)
    assert isinstance(batch.ending, LatestSpec)
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.client.bootstrap is None
    stream = parse_source_options(opts(subscribe="a"), streaming=True)
    assert isinstance(stream.starting, LatestSpec)
    assert stream.ending is None


def test_subscribe_lists_topics_and_trims_them() -> None:
    o = parse_source_options(opts(subscribe=" a, b ,,c"), streaming=False)
    assert o.subscription.topics == ("a", "b", "c")


def test_assign_parses_json_partitions() -> None:
    o = parse_source_options(opts(assign='{"t":[1,0],"u":[2]}'), streaming=False)
    assert o.subscription.assignments == (("t", 0), ("t", 1), ("u", 2))


@pytest.mark.parametrize("given", [{}, {"subscribe": "a", "assign": '{"a":[0]}'},
                                   {"subscribe": "a", "subscribepattern": "a.*"}])
def test_exactly_one_strategy_is_required(given: dict[str, str]) -> None:
    with pytest.raises(PylogOptionError, match="assign, subscribe, subscribePattern"):
        parse_source_options(given, streaming=False)


def test_unknown_option_is_named_with_a_suggestion() -> None:
    with pytest.raises(PylogOptionError, match=r"Unknown option 'startingoffset'.*startingOffsets"):
        parse_source_options(opts(subscribe="a", startingOffset="earliest"), streaming=False)


def test_kafka_options_pass_through_without_prefix_and_bootstrap_alias() -> None:
    o = parse_source_options(opts(subscribe="a", kafka__bootstrap__servers="h:1",
                                  kafka__isolation__level="read_uncommitted"), streaming=False)
    assert o.client.bootstrap == "h:1"
    assert o.client.kafka_conf == {"isolation.level": "read_uncommitted"}
    alias = parse_source_options(opts(subscribe="a", bootstrap__servers="h:2"), streaming=False)
    assert alias.client.bootstrap == "h:2"


def test_conflicting_bootstrap_options_fail() -> None:
    with pytest.raises(PylogOptionError, match=r"bootstrap.servers"):
        parse_source_options(opts(subscribe="a", bootstrap__servers="h:2",
                                  kafka__bootstrap__servers="h:1"), streaming=False)


@pytest.mark.parametrize("prop", ["auto.offset.reset", "enable.auto.commit", "key.deserializer",
                                  "value.deserializer"])
def test_kafka_settings_the_source_owns_are_refused(prop: str) -> None:
    with pytest.raises(PylogOptionError, match=f"'kafka.{prop}' is not supported"):
        parse_source_options({"subscribe": "a", f"kafka.{prop}": "x"}, streaming=False)


def test_offsets_json_and_words() -> None:
    o = parse_source_options(opts(subscribe="t", startingOffsets='{"t":{"0":23,"1":-2}}',
                                  endingOffsets='{"t":{"0":50,"1":-1}}'), streaming=False)
    assert o.starting == OffsetsSpec({("t", 0): 23, ("t", 1): -2})
    assert o.ending == OffsetsSpec({("t", 0): 50, ("t", 1): -1})
    g = parse_source_options(opts(subscribe="t", startingOffsets="group"), streaming=True)
    assert isinstance(g.starting, GroupSpec)


@pytest.mark.parametrize("text,match", [
    ('{"t":{"0":23', "not valid JSON"),
    ('{"t":[0]}', "must map to an object"),
    ('{"t":{"x":1}}', "partition key 'x'"),
    ('{"t":{"0":"5"}}', "whole number"),
    ('{"t":{"0":-3}}', "-2 \\(earliest\\) or -1 \\(latest\\)"),
    ("middle", "'earliest', 'latest'"),
])
def test_malformed_offsets_name_the_option(text: str, match: str) -> None:
    with pytest.raises(PylogOptionError, match=f"'startingOffsets'.*{match}|{match}"):
        parse_source_options(opts(subscribe="t", startingOffsets=text), streaming=False)


def test_batch_bounds_follow_spark_rules() -> None:
    with pytest.raises(PylogOptionError, match="starting offset can't be latest"):
        parse_source_options(opts(subscribe="t", startingOffsets="latest"), streaming=False)
    with pytest.raises(PylogOptionError, match="ending offset can't be earliest"):
        parse_source_options(opts(subscribe="t", endingOffsets="earliest"), streaming=False)
    with pytest.raises(PylogOptionError, match="can't be earliest \\(-2\\)"):
        parse_source_options(opts(subscribe="t", endingOffsets='{"t":{"0":-2}}'),
                             streaming=False)


def test_ending_options_are_refused_in_streaming() -> None:
    with pytest.raises(PylogOptionError, match="'endingOffsets' is not valid in streaming"):
        parse_source_options(opts(subscribe="t", endingOffsets="latest"), streaming=True)


def test_timestamp_options_take_precedence_over_offsets() -> None:
    o = parse_source_options(opts(subscribe="t", startingTimestamp="1000",
                                  startingOffsets="earliest",
                                  endingOffsetsByTimestamp='{"t":{"0":2000}}'), streaming=False)
    assert o.starting == TimestampSpec(1000)
    assert o.ending == TimestampsSpec({("t", 0): 2000})
    with pytest.raises(PylogOptionError, match="'startingOffsetsByTimestampStrategy'"):
        parse_source_options(opts(subscribe="t", startingOffsetsByTimestampStrategy="x"),
                             streaming=False)


def test_assign_requires_offsets_for_every_assigned_partition() -> None:
    with pytest.raises(PylogOptionError, match="t-1"):
        parse_source_options(opts(assign='{"t":[0,1]}', startingOffsets='{"t":{"0":1}}'),
                             streaming=False)


def test_numeric_limits_and_durations() -> None:
    o = parse_source_options(opts(subscribe="t", maxOffsetsPerTrigger="1000",
                                  minOffsetsPerTrigger="10", maxTriggerDelay="30s",
                                  minPartitions="8", maxRecordsPerPartition="100",
                                  maxBytesPerTrigger="1048576"), streaming=True)
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (
        1000, 10, 30_000)
    assert (o.min_partitions, o.max_records_per_partition, o.max_bytes_per_trigger) == (
        8, 100, 1_048_576)
    with pytest.raises(PylogOptionError, match="'minPartitions' must be >= 1"):
        parse_source_options(opts(subscribe="t", minPartitions="0"), streaming=False)
    with pytest.raises(PylogOptionError, match="'maxOffsetsPerTrigger' must be a whole number"):
        parse_source_options(opts(subscribe="t", maxOffsetsPerTrigger="lots"), streaming=True)
    with pytest.raises(PylogOptionError, match="'failOnDataLoss' must be 'true' or 'false'"):
        parse_source_options(opts(subscribe="t", failOnDataLoss="yes"), streaming=True)


def test_group_id_options() -> None:
    o = parse_source_options(opts(subscribe="t", groupId="g1"), streaming=True)
    assert o.group_id == "g1"
    k = parse_source_options(opts(subscribe="t", kafka__group__id="g2"), streaming=True)
    assert k.group_id == "g2"
    with pytest.raises(PylogOptionError, match=r"'groupId' and 'kafka.group.id' differ"):
        parse_source_options(opts(subscribe="t", groupId="a", kafka__group__id="b"),
                             streaming=True)


def test_avro_options_need_a_valid_schema() -> None:
    with pytest.raises(PylogOptionError, match="'avroSchema' is not set"):
        parse_source_options(opts(subscribe="t", valueFormat="avro"), streaming=False)
    with pytest.raises(PylogOptionError, match="'avroSchema' is not a valid Avro schema"):
        parse_source_options(opts(subscribe="t", valueFormat="avro", avroSchema="{nope"),
                             streaming=False)
    with pytest.raises(PylogOptionError, match="'valueFormat' must be 'raw' or 'avro'"):
        parse_source_options(opts(subscribe="t", valueFormat="json"), streaming=False)


def test_sink_options() -> None:
    s = parse_sink_options(opts(topic="out", kafka__bootstrap__servers="h:1",
                                kafka__linger__ms="10"))
    assert s.topic == "out" and s.client.bootstrap == "h:1"
    assert s.client.kafka_conf == {"linger.ms": "10"}
    with pytest.raises(PylogOptionError, match="Unknown option 'subscribe' for the pylog sink"):
        parse_sink_options(opts(subscribe="t"))
    with pytest.raises(PylogOptionError, match=r"'kafka.value.serializer' is not supported"):
        parse_sink_options({"kafka.value.serializer": "x"})


def test_spark_internal_keys_are_accepted() -> None:
    s = parse_sink_options({"checkpointlocation": "/tmp/x", "path": "p"})
    assert s.topic is None
