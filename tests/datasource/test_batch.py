"""Batch reads and writes through Spark against a real broker process.

The reads and writes mirror the examples of Spark's Structured Streaming + Kafka Integration
Guide with only the format name changed.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from spark_log.datasource import PylogDataSource
from spark_log.datasource.arrow import arrow_schema
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique

pytestmark = pytest.mark.spark


def read(spark, broker: BrokerProcess, **options: str):
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def strings(df):
    return df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")


def test_write_then_read_round_trip(spark, shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("roundtrip"), partitions=3)
    rows = [(f"k{i}", f"v{i}") for i in range(300)]
    expected = spark.createDataFrame(rows, "key string, value string")
    (expected.write.format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
     .option("topic", topic).mode("append").save())
    got = strings(read(spark, shared_broker, subscribe=topic))
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_schema_is_sparks_kafka_schema(spark, shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("schema"))
    df = read(spark, shared_broker, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    ds = PylogDataSource({"subscribe": topic, "includeheaders": "true"})
    assert arrow_schema(ds.schema()).field("timestamp").type == pa.timestamp("us", tz="UTC")


def test_read_yields_arrow_batches_with_sparks_arrow_schema(shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("arrow"))
    produce(shared_broker, topic, [b"a", b"b"], keys=[b"1", None], timestamps=[1000, 2000],
            headers=[[("h", b"x")], []])
    ds = PylogDataSource({"subscribe": topic, "includeheaders": "true",
                          "kafka.bootstrap.servers": shared_broker.bootstrap})
    schema = ds.schema()
    reader = ds.reader(schema)
    (part,) = reader.partitions()
    batches = list(reader.read(part))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.schema == arrow_schema(schema)
    assert table.column("key").to_pylist() == [b"1", None]
    assert table.column("timestamp").to_pylist() == [
        dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
        dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)]
    assert table.column("timestampType").to_pylist() == [0, 0]
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}], []]


def test_guide_subscribe_one_several_and_pattern(spark, shared_broker: BrokerProcess) -> None:
    prefix = unique("guide")
    t1, t2 = f"{prefix}-topic1", f"{prefix}-topic2"
    for t in (t1, t2):
        create_topic(shared_broker, t)
        produce(shared_broker, t, [f"{t}-v{i}" for i in range(5)], keys=[f"k{i}" for i in
                                                                       range(5)])
    servers = shared_broker.bootstrap
    # Subscribe to 1 topic
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", servers)
          .option("subscribe", t1).load())
    assert df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").count() == 5
    # Subscribe to multiple topics
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", servers)
          .option("subscribe", f"{t1},{t2}").load())
    assert sorted(r.topic for r in df.select("topic").distinct().collect()) == [t1, t2]
    assert df.count() == 10
    # Subscribe to a pattern
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", servers)
          .option("subscribePattern", f"{prefix}-topic.*").load())
    assert df.count() == 10


def test_guide_batch_with_offset_json(spark, shared_broker: BrokerProcess) -> None:
    t1, t2 = unique("range1"), unique("range2")
    create_topic(shared_broker, t1, partitions=2)
    create_topic(shared_broker, t2)
    for p in (0, 1):
        produce(shared_broker, t1, [f"p{p}-{i}" for i in range(10)], partition=p)
    produce(shared_broker, t2, [f"x{i}" for i in range(10)])
    df = (spark.read.format("pylog")
          .option("kafka.bootstrap.servers", shared_broker.bootstrap)
          .option("subscribe", f"{t1},{t2}")
          .option("startingOffsets", json.dumps({t1: {"0": 23 - 20, "1": -2}, t2: {"0": -2}}))
          .option("endingOffsets", json.dumps({t1: {"0": 5, "1": -1}, t2: {"0": -1}}))
          .load())
    got = {(r.topic, r.partition, r.offset) for r in df.collect()}
    assert got == ({(t1, 0, o) for o in range(3, 5)} | {(t1, 1, o) for o in range(10)}
                   | {(t2, 0, o) for o in range(10)})


def test_guide_writes_with_topic_column_and_topic_option(spark, shared_broker: BrokerProcess
                                                         ) -> None:
    a, b = unique("w-col"), unique("w-opt")
    create_topic(shared_broker, a)
    create_topic(shared_broker, b)
    df = spark.createDataFrame([("k1", "v1", a), ("k2", "v2", a)], "key string, value string, "
                               "topic string")
    # Write key-value data from a DataFrame to a specific Kafka topic specified in an option
    (df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").write.format("pylog")
     .option("kafka.bootstrap.servers", shared_broker.bootstrap).option("topic", b)
     .mode("append").save())
    # Write key-value data from a DataFrame to Kafka using a topic specified in the data
    (df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)").write
     .format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
     .mode("append").save())
    for topic in (a, b):
        got = strings(read(spark, shared_broker, subscribe=topic))
        assert sorted(tuple(r) for r in got.collect()) == [("k1", "v1"), ("k2", "v2")]


def test_write_with_partition_and_headers_columns(spark, shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("w-hdr"), partitions=3)
    df = spark.createDataFrame(
        [("a", 2, [("h1", b"x")]), ("b", 1, [])],
        "value string, partition int, headers array<struct<key:string,value:binary>>")
    (df.write.format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
     .option("topic", topic).mode("append").save())
    got = read(spark, shared_broker, subscribe=topic, includeHeaders="true")
    rows = sorted((r.value.decode(), r.partition, [tuple(h) for h in r.headers])
                  for r in got.collect())
    assert rows == [("a", 2, [("h1", b"x")]), ("b", 1, [])]


def test_keys_are_partitioned_like_the_java_client(spark, shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("murmur"), partitions=4)
    df = spark.createDataFrame([("key1", "v"), ("a", "v"), ("spark", "v")], "key string, "
                               "value string")
    (df.write.format("pylog").option("kafka.bootstrap.servers", shared_broker.bootstrap)
     .option("topic", topic).mode("append").save())
    got = {r.key.decode(): r.partition for r in read(spark, shared_broker,
                                                       subscribe=topic).collect()}
    # The Java client's partitioner: (murmur2(key) & 0x7fffffff) % 4.
    assert got == {k: _java_partition(k.encode(), 4) for k in got}


def _java_partition(key: bytes, partitions: int) -> int:
    return (_murmur2(key) & 0x7FFFFFFF) % partitions


def _murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as 32-bit signed arithmetic."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def test_min_partitions_splits_one_partition_into_eight_tasks(spark,
                                                             shared_broker: BrokerProcess
                                                             ) -> None:
    topic = create_topic(shared_broker, unique("split"))
    produce(shared_broker, topic, [f"v{i}" for i in range(800)])
    whole = read(spark, shared_broker, subscribe=topic)
    split = read(spark, shared_broker, subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() == 8
    assert_df_equality(split, whole, ignore_row_order=True)
    capped = read(spark, shared_broker, subscribe=topic, maxRecordsPerPartition="300")
    assert capped.rdd.getNumPartitions() == 3


def test_timestamps_bound_a_batch(spark, shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("times"))
    produce(shared_broker, topic, [f"v{i}" for i in range(10)],
            timestamps=[1_000_000 + 1000 * i for i in range(10)])
    df = read(spark, shared_broker, subscribe=topic, startingTimestamp="1003000",
              endingTimestamp="1007000")
    assert sorted(r.offset for r in df.collect()) == [3, 4, 5, 6]
    with pytest.raises(Exception, match="no record at or after the timestamp"):
        read(spark, shared_broker, subscribe=topic, startingTimestamp="9999999999").count()
    late = read(spark, shared_broker, subscribe=topic, startingTimestamp="9999999999",
                startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0


def test_filters_on_partition_offset_and_timestamp_narrow_the_ranges(
        shared_broker: BrokerProcess) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    topic = create_topic(shared_broker, unique("pushdown"), partitions=2)
    day = 86_400_000
    for p in (0, 1):
        produce(shared_broker, topic, [f"v{i}" for i in range(30)], partition=p,
                timestamps=[day * (1 + i // 10) for i in range(30)])  # 10 records a day
    from spark_log.datasource.options import parse_source_options
    from spark_log.datasource.reader import PylogPushdownReader

    options = {"subscribe": topic, "kafka.bootstrap.servers": shared_broker.bootstrap}
    ds = PylogDataSource(options)
    reader = PylogPushdownReader(parse_source_options(options, streaming=False), ds.schema())
    utc = dt.UTC
    remaining = list(reader.pushFilters([
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("timestamp",), dt.datetime(1970, 1, 3, tzinfo=utc)),
        LessThan(("timestamp",), dt.datetime(1970, 1, 4, tzinfo=utc)),
        GreaterThanOrEqual(("offset",), 12)]))
    assert len(remaining) == 2  # Spark re-checks the timestamp filters only
    (task,) = reader.partitions()
    assert (task.topic, task.partition, task.start, task.end) == (topic, 1, 12, 20)


def test_register_leaves_pushdown_off_unless_asked(spark) -> None:
    import spark_log

    conf = spark_log.FILTER_PUSHDOWN_CONF
    spark.conf.set(conf, "false")
    spark_log.register(spark)
    assert spark.conf.get(conf) == "false"
    spark_log.register(spark, filter_pushdown=True)
    assert spark.conf.get(conf) == "true"
    spark.conf.set(conf, "false")


def test_filter_pushdown_in_spark_returns_the_filtered_rows(spark, shared_broker: BrokerProcess
                                                            ) -> None:
    topic = create_topic(shared_broker, unique("pushdown-spark"), partitions=2)
    for p in (0, 1):
        produce(shared_broker, topic, [f"v{i}" for i in range(20)], partition=p,
                timestamps=[1000 * (i + 1) for i in range(20)])
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read(spark, shared_broker, subscribe=topic).where(
            "partition = 1 AND offset >= 5 AND timestamp < CAST(11 AS TIMESTAMP)")
        assert sorted(r.offset for r in df.collect()) == [5, 6, 7, 8, 9]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_avro_values_round_trip_raw_and_confluent_framed(spark, shared_broker: BrokerProcess
                                                         ) -> None:
    schema = json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]})
    users = spark.createDataFrame([("k1", ("ann", 31)), ("k2", ("bob", None))],
                                  "key string, value struct<name:string,age:int>")
    for framing in ({}, {"avroSchemaId": "7"}):
        topic = create_topic(shared_broker, unique("avro"))
        writer = (users.write.format("pylog").option("kafka.bootstrap.servers",
                                                     shared_broker.bootstrap)
                  .option("topic", topic).option("valueFormat", "avro")
                  .option("avroSchema", schema))
        for k, v in framing.items():
            writer = writer.option(k, v)
        writer.mode("append").save()
        raw = read(spark, shared_broker, subscribe=topic).collect()
        assert (raw[0].value[0:5] == b"\x00\x00\x00\x00\x07") == bool(framing)
        got = read(spark, shared_broker, subscribe=topic, valueFormat="avro",
                   avroSchema=schema).selectExpr("CAST(key AS STRING) AS key", "value")
        assert_df_equality(got, users, ignore_row_order=True, ignore_nullable=True)


def test_fail_on_data_loss_after_delete_records(spark, shared_broker: BrokerProcess) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = create_topic(shared_broker, unique("loss"))
    produce(shared_broker, topic, [f"v{i}" for i in range(20)])
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 10)])[TopicPartition(topic, 0, 10)].result(30)
    offsets = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss") as info:
        read(spark, shared_broker, subscribe=topic, startingOffsets=offsets).count()
    assert "[0, 10)" in str(info.value)
    tolerant = read(spark, shared_broker, subscribe=topic, startingOffsets=offsets,
                    failOnDataLoss="false")
    assert sorted(r.offset for r in tolerant.collect()) == list(range(10, 20))


def test_errors_name_the_option_before_any_job(spark, shared_broker: BrokerProcess) -> None:
    def base():
        return spark.read.format("pylog").option("kafka.bootstrap.servers",
                                                 shared_broker.bootstrap)

    with pytest.raises(Exception, match="Only one of the following options can be specified"):
        base().option("subscribe", "a").option("assign", '{"a":[0]}').load().count()
    with pytest.raises(Exception, match=r"Unknown option 'subscrib'.*Did you mean 'subscribe'"):
        base().option("subscrib", "a").load().count()
    with pytest.raises(Exception, match="'startingOffsets' is not valid JSON"):
        base().option("subscribe", "a").option("startingOffsets", '{"a":').load().count()
    missing = unique("missing")
    with pytest.raises(Exception, match=f"Topic\\(s\\) '{missing}' of option 'subscribe' do "
                                        "not exist"):
        base().option("subscribe", missing).load().count()
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute"):
        (spark.createDataFrame([("v",)], "value string").write.format("pylog")
         .option("kafka.bootstrap.servers", shared_broker.bootstrap).mode("append").save())
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        (spark.createDataFrame([("v",)], "key string").write.format("pylog")
         .option("kafka.bootstrap.servers", shared_broker.bootstrap).option("topic", "x")
         .mode("append").save())


def test_unreachable_broker_names_the_address(spark) -> None:
    import socket

    with socket.socket() as s:  # bound, never listening (so no one else can): refused
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        df = (spark.read.format("pylog").option("kafka.bootstrap.servers", address)
              .option("subscribe", "t").option("clientTimeoutMs", "5000").load())
        with pytest.raises(Exception, match=f"Cannot reach the Kafka cluster at {address}"):
            df.count()


def test_direct_fetch_and_consumer_paths_read_the_same_rows(spark, shared_broker: BrokerProcess
                                                            ) -> None:
    from confluent_kafka import Producer

    topic = create_topic(shared_broker, unique("paths"), partitions=2)
    for codec in ("none", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": shared_broker.bootstrap,
                             "compression.type": codec, "linger.ms": 5})
        for i in range(500):
            producer.produce(topic, value=None if i % 97 == 0 else f"{codec}-{i}" * (i % 7),
                             key=None if i % 3 else f"k{i}",
                             headers=[("h", f"{i}".encode()), ("n", None)] if i % 5 == 0
                             else None)
        assert producer.flush(30) == 0
    direct = read(spark, shared_broker, subscribe=topic, includeHeaders="true")
    consumer = read(spark, shared_broker, subscribe=topic, includeHeaders="true",
                    directFetch="false")
    assert direct.count() == 1500
    assert_df_equality(direct, consumer, ignore_row_order=True)
