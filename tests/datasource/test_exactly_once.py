"""The exactly-once sink in one Spark session against a real broker: option errors, what a dead
run left behind (open transactions, a pending commit decision), and a micro-batch replayed
because Spark lost its commit record."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spark_log.datasource.errors import PylogOptionError
from spark_log.datasource.options import parse_sink_options, parse_source_options
from spark_log.datasource.txn_options import DEFAULT_EXACTLY_ONCE, resolve_prefix
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique
from tests.datasource.exactly_once_readers import end_offsets, read_values

DEADLINE_S = 180


# ---- options -------------------------------------------------------------------------------


def sink(streaming: bool = True, **options: str) -> Any:
    return parse_sink_options({k.replace("__", ".").lower(): v for k, v in options.items()},
                              streaming=streaming)


@pytest.mark.parametrize(("options", "message"), [
    ({"exactlyOnce": "yes", "checkpointLocation": "/c"},
     r"Option 'exactlyOnce' must be 'true' or 'false', got 'yes'"),
    ({"checkpointLocation": "/c", "kafka__transactional__id": "t"},
     r"'kafka.transactional.id' cannot be set: pylog's writers manage producers themselves"),
    ({"checkpointLocation": "/c", "kafka__security__protocol": "SASL_SSL"},
     r"Exactly-once writes need a PLAINTEXT listener; 'kafka.security.protocol' is 'SASL_SSL'"),
    ({}, r"Exactly-once writes must recognise the query when it restarts: give the checkpoint "
         r"with .option\('checkpointLocation', ...\), name the query"),
    ({"transactionalIdPrefix": "  "}, r"Option 'transactionalIdPrefix' is empty."),
    ({"checkpointLocation": "/c", "sourceGroupId": " , "},
     r"Option 'sourceGroupId' is empty: give the groupId of the query's pylog source"),
    ({"checkpointLocation": "/c", "kafka__transaction__timeout__ms": "soon"},
     r"Option 'kafka.transaction.timeout.ms' must be a whole number of ms, got 'soon'"),
    ({"checkpointLocation": "/c", "kafka__transaction__timeout__ms": "0"},
     r"Option 'kafka.transaction.timeout.ms' must be > 0, got 0"),
])
def test_bad_exactly_once_options_are_refused_with_their_name(options: dict[str, str],
                                                              message: str) -> None:
    with pytest.raises(PylogOptionError, match=message):
        sink(**options)


def test_streaming_only_options_are_refused_in_batch_writes() -> None:
    for name in ("transactionalIdPrefix", "sourceGroupId"):
        with pytest.raises(PylogOptionError,
                           match=f"Option '{name}' applies to streaming writes only"):
            sink(False, **{name: "x"})
    assert not sink(False, exactlyOnce="true").txn.enabled  # batch writes: at least once
    for streaming in (False, True):  # the producer would turn transactional: refused
        with pytest.raises(PylogOptionError, match=r"'kafka\.transactional\.id' cannot be set"):
            sink(streaming, exactlyOnce="false", kafka__transactional__id="t")
    assert not sink(True, exactlyOnce="false", kafka__security__protocol="SSL").txn.enabled


def test_source_commit_offsets_modes() -> None:
    with pytest.raises(PylogOptionError, match=r"'commitOffsets' must be 'true', 'false' or "
                                               r"'transactional', got 'later'"):
        parse_source_options({"subscribe": "t", "commitoffsets": "later"}, streaming=True)
    with pytest.raises(PylogOptionError, match=r"'commitOffsets' is 'transactional': give the "
                                               r"group with 'groupId'"):
        parse_source_options({"subscribe": "t", "commitoffsets": "transactional"},
                             streaming=True)
    o = parse_source_options({"subscribe": "t", "commitoffsets": "transactional",
                              "groupid": "g"}, streaming=True)
    assert o.publish_planned and not o.commit_offsets


def test_exactly_once_is_the_default_and_its_identity_survives_a_restart() -> None:
    assert DEFAULT_EXACTLY_ONCE
    default = sink(checkpointLocation="/ckpt/q1")
    assert default.txn.enabled
    assert default.txn.prefix == sink(checkpointLocation="/ckpt/q1/").txn.prefix
    assert default.txn.prefix != sink(checkpointLocation="/ckpt/q2").txn.prefix
    assert sink(queryName="q1").txn.prefix == resolve_prefix({"queryname": "q1"})
    explicit = sink(checkpointLocation="/ckpt/q1", transactionalIdPrefix="orders",
                    sourceGroupId="g1, g2")
    assert (explicit.txn.prefix, explicit.txn.source_groups) == ("orders", ("g1", "g2"))
    assert not sink(exactlyOnce="false").txn.enabled  # no identity needed


# ---- with Spark and a broker -----------------------------------------------------------------

spark_tests = pytest.mark.spark


def values(broker: BrokerProcess, topic: str, isolation: str) -> Counter[bytes]:
    return Counter(read_values(broker.bootstrap, topic, isolation,
                               time.monotonic() + DEADLINE_S))


def run_query(spark: Any, broker: BrokerProcess, source: str, output: str, checkpoint: Path,
              per_trigger: int | None = None, source_options: dict[str, str] | None = None,
              **sink_options: str) -> Any:
    """Copy `source` to `output` (value only) with Trigger.AvailableNow; returns the query."""
    reader = (spark.readStream.format("pylog").option("kafka.bootstrap.servers",
                                                      broker.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(per_trigger))
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    writer = (reader.load().select("value").writeStream.format("pylog")
              .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", output)
              .option("checkpointLocation", str(checkpoint)))
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(DEADLINE_S), "the query did not finish"
    assert query.exception() is None
    return query


def topics(broker: BrokerProcess, rows: int, partitions: int = 2) -> tuple[str, str, list[bytes]]:
    source = create_topic(broker, unique("in"), partitions)
    output = create_topic(broker, unique("out"), partitions)
    sent = [f"v{i}".encode() for i in range(rows)]
    produce(broker, source, sent)
    return source, output, sent


@spark_tests
def test_bad_option_fails_the_streaming_query_with_its_message(
        spark: Any, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    source, output, _ = topics(shared_broker, 10)
    with pytest.raises(Exception, match="Option 'exactlyOnce' must be 'true' or 'false', "
                                        "got 'sometimes'"):
        run_query(spark, shared_broker, source, output, tmp_path / "ckpt",
                  exactlyOnce="sometimes")


@spark_tests
def test_restarted_query_fences_the_open_transactions_of_a_dead_run(
        spark: Any, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """A dead run left a task transaction open (task 7: this run has two tasks, so no task of
    it reuses that id) and its batch barrier: both hold read_committed consumers back and
    would commit rows nobody decided on; the next run aborts them before it writes. Another
    query's transaction, whose prefix merely starts with this query's task prefix, is left
    alone."""
    from confluent_kafka import KafkaException

    from spark_log.datasource.txn_ids import barrier_id, task_id

    source, output, sent = topics(shared_broker, 100)
    prefix = unique("dead-run")
    ghosts = [_open_transaction(shared_broker, tid, output, value) for tid, value in (
        (task_id(prefix, 7), b"ghost-task"), (barrier_id(prefix), b"ghost-bar"))]
    other = _open_transaction(shared_broker, task_id(f"{prefix}-task-b", 0), output, b"other")
    held = end_offsets(_admin(shared_broker), output, [0, 1], "read_committed")
    assert held[0] == 0  # the open transactions hold read_committed consumers back

    run_query(spark, shared_broker, source, output, tmp_path / "ckpt",
              transactionalIdPrefix=prefix)
    other.commit_transaction(30)  # not fenced
    assert values(shared_broker, output, "read_committed") == Counter([*sent, b"other"])
    logged = values(shared_broker, output, "read_uncommitted")
    assert logged[b"ghost-task"] == 1 and logged[b"ghost-bar"] == 1  # in the log, aborted
    for ghost in ghosts:
        with pytest.raises(KafkaException):  # fenced: the dead run cannot commit any more
            ghost.commit_transaction(30)
    assert values(shared_broker, output, "read_committed") == Counter([*sent, b"other"])


def _open_transaction(broker: BrokerProcess, transactional_id: str, topic: str,
                      value: bytes) -> Any:
    """A producer with an open transaction holding `value` in partition 0 of `topic`."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3,
                         "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    return producer


def _admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})


@spark_tests
@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_batch_committed_but_missing_from_spark_commit_log_is_not_written_twice(
        spark: Any, shared_broker: BrokerProcess, tmp_path: Path, exactly_once: bool) -> None:
    """The driver died after the sink committed micro-batch 2 and before Spark recorded it:
    the restarted query runs batch 2 again. Exactly-once recognises it; at least once writes
    it twice, which shows the test can tell."""
    source, output, sent = topics(shared_broker, 3000)
    group = unique("etl")
    options: dict[str, str] = {"exactlyOnce": str(exactly_once).lower()}
    source_options = {"groupId": group}
    if exactly_once:
        options["sourceGroupId"] = group
        source_options["commitOffsets"] = "transactional"
    checkpoint = tmp_path / "ckpt"
    first = run_query(spark, shared_broker, source, output, checkpoint, 1000, source_options,
                      **options)
    assert [p["batchId"] for p in first.recentProgress if p["numInputRows"]] == [0, 1, 2]
    for lost in (checkpoint / "commits" / "2", checkpoint / "commits" / ".2.crc"):
        lost.unlink()
    again = run_query(spark, shared_broker, source, output, checkpoint, 1000, source_options,
                      **options)
    assert [(p["batchId"], p["numInputRows"]) for p in again.recentProgress
            if p["numInputRows"]] == [(2, 1000)]  # the replay
    written = values(shared_broker, output, "read_committed")
    assert set(written) == set(sent)
    twice = {v for v, n in written.items() if n == 2}
    if exactly_once:
        assert not twice
        ends = end_offsets(_admin(shared_broker), source, [0, 1], "read_committed")
        assert _committed(shared_broker, group, source) == ends
    else:
        assert len(twice) == 1000 and max(written.values()) == 2


def _committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = _admin(broker)  # kept: a destroyed client never completes its futures
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in (0, 1)])]
    answer = admin.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


@spark_tests
def test_commit_decision_left_pending_by_a_dead_driver_is_finished_by_the_next_run(
        spark: Any, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """A driver recorded its decision to commit a micro-batch and died before ending the
    batch's transactions: the next run commits them before it writes anything."""
    from spark_log.client.group_offsets import GroupOffsetsClient
    from spark_log.client.transactions import TransactionClient
    from spark_log.datasource.commit_log import DONE, PENDING, CommitLog, Decision
    from spark_log.datasource.txn_ids import TxnRef, task_id

    source, output, sent = topics(shared_broker, 100)
    prefix = unique("pending")
    tid = task_id(prefix, 5)
    decided = b"decided"
    _open_transaction(shared_broker, tid, output, decided)
    with TransactionClient(shared_broker.bootstrap) as client, \
            GroupOffsetsClient(shared_broker.bootstrap) as groups:
        info = client.describe(tid)
        commits = CommitLog(groups, prefix)
        commits.ensure_topic({})
        commits.decide(Decision("dead-query", 0, (TxnRef(tid, info.producer_id,
                                                         info.producer_epoch, 5),), None))
        assert commits.state().status == PENDING
    assert not values(shared_broker, output, "read_committed")

    run_query(spark, shared_broker, source, output, tmp_path / "ckpt",
              transactionalIdPrefix=prefix)
    assert values(shared_broker, output, "read_committed") == Counter([*sent, decided])
    with GroupOffsetsClient(shared_broker.bootstrap) as groups:
        assert CommitLog(groups, prefix).state().status == DONE


def test_commit_decisions_topic_is_compacted_and_lookups_create_no_topic(
        broker: BrokerProcess) -> None:
    """The decisions topic keeps each query's latest decision for as long as the query lives,
    so it must be created compacted, not auto-created with the broker's defaults by the
    metadata lookup that checks whether it exists."""
    from confluent_kafka.admin import ConfigResource

    from spark_log.client.group_offsets import GroupOffsetsClient
    from spark_log.datasource.commit_log import CommitLog
    from spark_log.datasource.txn_ids import COMMITS_TOPIC

    with GroupOffsetsClient(broker.bootstrap) as client:
        assert client.leaders(["looked-up-only"]) == {}
        CommitLog(client, "q").ensure_topic({})
        assert client.leaders([COMMITS_TOPIC]) == {(COMMITS_TOPIC, 0): broker.bootstrap}
    admin = _admin(broker)
    assert "looked-up-only" not in admin.list_topics(timeout=10).topics
    resource = ConfigResource("topic", COMMITS_TOPIC)
    config = admin.describe_configs([resource])[resource].result(30)
    assert config["cleanup.policy"].value == "compact"
