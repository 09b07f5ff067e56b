"""Streaming reads and writes through Spark against a real broker process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique

pytestmark = pytest.mark.spark

DEADLINE_S = 120


def stream(spark, broker: BrokerProcess, **options: str):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df, checkpoint: Path, name: str, sink: str = "memory",
                      path: Path | None = None):
    writer = df.writeStream.format(sink).queryName(name).option("checkpointLocation",
                                                                 str(checkpoint))
    if path is not None:
        writer = writer.option("path", str(path))
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(DEADLINE_S), "AvailableNow query did not finish"
    assert query.exception() is None
    return query


def rows_per_batch(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def group_lag(broker: BrokerProcess, group: str, topic: str) -> int | None:
    """Lag of `group` on `topic` as confluent-kafka's AdminClient reports it (None: nothing
    committed yet)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    parts = admin.list_topics(timeout=10).topics[topic].partitions
    tps = [TopicPartition(topic, p) for p in parts]
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, tps)])[group].result(10).topic_partitions
    ends = {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}).items()}
    if any(c.offset < 0 for c in committed):
        return None
    return sum(ends[c.partition] - c.offset for c in committed)


def test_max_offsets_per_trigger_makes_ten_batches_then_available_now_stops(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(shared_broker, unique("trigger"))
    produce(shared_broker, topic, [f"v{i}" for i in range(10_000)])
    df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="1000")
    query = run_available_now(df, tmp_path / "ckpt", "trigger_ten")
    assert rows_per_batch(query) == [1000] * 10
    assert spark.table("trigger_ten").count() == 10_000


def test_max_bytes_per_trigger_limits_each_batch(spark, shared_broker: BrokerProcess,
                                                 tmp_path: Path) -> None:
    topic = create_topic(shared_broker, unique("bytes"))
    produce(shared_broker, topic, [b"x" * 100] * 1000)
    df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest",
                maxBytesPerTrigger="25000")
    query = run_available_now(df, tmp_path / "ckpt", "bytes_limit")
    assert rows_per_batch(query) == [250] * 4


def test_restart_from_checkpoint_reads_only_new_records_and_commits_the_group(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(shared_broker, unique("restart"), partitions=2)
    group = unique("lag-group")
    produce(shared_broker, topic, [f"a{i}" for i in range(200)])
    df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest",
                groupId=group)
    out = tmp_path / "out"
    first = run_available_now(df.selectExpr("CAST(value AS STRING) v"), tmp_path / "ckpt",
                              "restart_1", "parquet", out)
    assert sum(rows_per_batch(first)) == 200
    assert group_lag(shared_broker, group, topic) == 0
    produce(shared_broker, topic, [f"b{i}" for i in range(50)])
    assert group_lag(shared_broker, group, topic) == 50
    second = run_available_now(df.selectExpr("CAST(value AS STRING) v"), tmp_path / "ckpt",
                               "restart_2", "parquet", out)
    assert sum(rows_per_batch(second)) == 50
    values = [r.v for r in spark.read.parquet(str(out)).collect()]
    assert sorted(values) == sorted([f"a{i}" for i in range(200)] + [f"b{i}" for i in range(50)])
    assert group_lag(shared_broker, group, topic) == 0


def test_starting_offsets_group_resumes_from_committed_offsets(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = create_topic(shared_broker, unique("from-group"))
    group = unique("resume")
    produce(shared_broker, topic, [f"v{i}" for i in range(30)])
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 25)])])[group].result(10)
    df = stream(spark, shared_broker, subscribe=topic, startingOffsets="group", groupId=group)
    run_available_now(df, tmp_path / "ckpt", "from_group")
    assert sorted(r.offset for r in spark.table("from_group").collect()) == [25, 26, 27, 28, 29]


def test_available_now_ignores_records_produced_after_start_and_new_partitions_are_read(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = create_topic(shared_broker, unique("grow"))
    produce(shared_broker, topic, [f"v{i}" for i in range(20)])
    df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest")
    query = (df.writeStream.format("memory").queryName("grow")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        assert spark.table("grow").count() == 20
        admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        produce(shared_broker, topic, [f"n{i}" for i in range(7)], partition=1)
        deadline = time.monotonic() + DEADLINE_S
        while spark.table("grow").where("partition = 1").count() < 7:
            assert time.monotonic() < deadline, "records of the new partition never arrived"
            query.processAllAvailable()
        assert sorted(r.offset for r in spark.table("grow").where("partition = 1").collect()) \
            == list(range(7))
    finally:
        query.stop()


def test_stream_write_to_pylog(spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    source = create_topic(shared_broker, unique("s-in"))
    sink = create_topic(shared_broker, unique("s-out"))
    produce(shared_broker, source, [f"v{i}" for i in range(100)], keys=[f"k{i}" for i in
                                                                       range(100)])
    df = stream(spark, shared_broker, subscribe=source, startingOffsets="earliest")
    query = (df.selectExpr("key", "UPPER(CAST(value AS STRING)) AS value").writeStream
             .format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(DEADLINE_S)
    got = (spark.read.format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
           .option("subscribe", sink).load()
           .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
    assert sorted((r.k, r.v) for r in got) == sorted((f"k{i}", f"V{i}") for i in range(100))


def test_streaming_fail_on_data_loss(spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = create_topic(shared_broker, unique("s-loss"))
    produce(shared_broker, topic, [f"v{i}" for i in range(40)])
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    tp = TopicPartition(topic, 0, 15)
    admin.delete_records([tp])[tp].result(30)
    strict = stream(spark, shared_broker, subscribe=topic,
                    startingOffsets=f'{{"{topic}":{{"0":0}}}}')
    query = (strict.writeStream.format("memory").queryName("loss_strict")
             .option("checkpointLocation", str(tmp_path / "strict"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="failOnDataLoss"):
        query.awaitTermination(DEADLINE_S)
    tolerant = stream(spark, shared_broker, subscribe=topic, failOnDataLoss="false",
                      startingOffsets=f'{{"{topic}":{{"0":0}}}}')
    run_available_now(tolerant, tmp_path / "tolerant", "loss_tolerant")
    assert sorted(r.offset for r in spark.table("loss_tolerant").collect()) == list(range(15, 40))


def test_pattern_subscription_picks_up_new_topics_from_earliest(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    prefix = unique("pat")
    create_topic(shared_broker, f"{prefix}-a")
    produce(shared_broker, f"{prefix}-a", ["a0", "a1"])
    df = stream(spark, shared_broker, subscribePattern=f"{prefix}-.*",
                startingOffsets="earliest")
    query = (df.selectExpr("topic", "CAST(value AS STRING) v").writeStream.format("memory")
             .queryName("pattern_new").option("checkpointLocation", str(tmp_path / "ckpt"))
             .start())
    try:
        query.processAllAvailable()
        create_topic(shared_broker, f"{prefix}-b")
        produce(shared_broker, f"{prefix}-b", ["b0", "b1", "b2"])
        deadline = time.monotonic() + DEADLINE_S
        while spark.table("pattern_new").count() < 5:
            assert time.monotonic() < deadline, "records of the new topic never arrived"
            query.processAllAvailable()
        got = sorted((r.topic, r.v) for r in spark.table("pattern_new").collect())
        assert got == [(f"{prefix}-a", "a0"), (f"{prefix}-a", "a1"), (f"{prefix}-b", "b0"),
                       (f"{prefix}-b", "b1"), (f"{prefix}-b", "b2")]
    finally:
        query.stop()
