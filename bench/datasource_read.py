"""pylog throughput benchmark; prints ratios measured in one run, not a test.

Read: N records of 100-byte values (two partitions) read into Spark by the pylog source, with
`count()` and with a `noop` sink, against a Python data source that yields the same Arrow
batches from memory (goal: ratio >= 0.5). Write: N rows written by `df.write.format("pylog")`
against confluent-kafka producing the same rows outside Spark. Micro-batch overhead: the mean
trigger time of one-record micro-batches of pylog against an in-memory streaming source.
The broker is a sidecar broker on a temporary data directory, stopped at the end.

Usage, from the repository root:
    PYTHONPATH=. .venv/bin/python bench/datasource_read.py [--records N] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

PARTITIONS = 2
VALUE = b"x" * 100
SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")
BATCH = 20_000
BENCH_RECORDS = int(os.environ.get("PYLOG_BENCH_RECORDS", "1000000"))


def memory_batches(partition: int, count: int) -> Iterator[pa.RecordBatch]:
    """What pylog yields for `count` records of one partition, built in memory."""
    from spark_log.datasource.arrow import arrow_schema, spark_schema

    schema = arrow_schema(spark_schema())
    for start in range(0, count, BATCH):
        n = min(BATCH, count - start)
        yield pa.RecordBatch.from_arrays([
            pa.array([None] * n, pa.binary()),
            pa.array([VALUE] * n, pa.binary()),
            pa.repeat(pa.scalar("bench", pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(range(start, start + n), pa.int64()),
            pa.repeat(pa.scalar(1_700_000_000_000_000, pa.timestamp("us", tz="UTC")), n),
            pa.repeat(pa.scalar(0, pa.int32()), n),
        ], schema=schema)


class MemorySource(DataSource):
    """The baseline: the same Arrow batches, from memory, in the same number of partitions."""

    @classmethod
    def name(cls) -> str:
        return "pylog_bench_memory"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema):  # type: ignore[no-untyped-def]
        return MemoryReader(int(self.options.get("records", BENCH_RECORDS)))

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        return OneRowStream()


class MemoryReader(DataSourceReader):
    def __init__(self, records: int) -> None:
        self.records = records

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from memory_batches(partition.value, self.records // PARTITIONS)


class OneRowStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One record per micro-batch (20 batches), for the overhead comparison."""

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict, limit) -> dict:  # type: ignore[no-untyped-def]
        return {"n": min(start["n"] + 1, 20)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        a, b = partition.value
        yield from memory_batches(0, b - a)


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def best(repeat: int, run: Callable[[], object]) -> float:
    return min(timed(run) for _ in range(repeat))


def produce(bootstrap: str, topic: str, count: int) -> float:
    """confluent-kafka producing `count` rows outside Spark, with pylog's producer settings."""
    from confluent_kafka import Producer

    from spark_log.datasource.client import producer_conf

    producer = Producer(producer_conf(bootstrap, {}))
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, None, i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS)])[name].result(30)


def stream_trigger_ms(spark, df, checkpoint: str) -> float:  # type: ignore[no-untyped-def]
    query = (df.writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    times = [p["durationMs"]["triggerExecution"] for p in query.recentProgress
             if p["numInputRows"] > 0]
    return statistics.median(times[2:] or times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=BENCH_RECORDS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYLOG_BENCH_RECORDS"] = str(args.records)
    from pyspark.sql import SparkSession

    import spark_log
    from spark_log import sidecar

    data_dir = tempfile.mkdtemp(prefix="pylog-bench-")
    try:
        bootstrap = sidecar.ensure_running(data_dir)
        spark = (SparkSession.builder.master(f"local[{PARTITIONS}]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", str(PARTITIONS)).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark_log.register(spark)
        spark.dataSource.register(MemorySource)
        n = args.records
        create_topic(bootstrap, "bench")
        produce_s = produce(bootstrap, "bench", n)
        print(f"records: {n:,} of {len(VALUE)} bytes in {PARTITIONS} partitions")

        def pylog_df(direct: str = "true"):  # type: ignore[no-untyped-def]
            return (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", "bench").option("directFetch", direct).load())

        def memory_df():  # type: ignore[no-untyped-def]
            return spark.read.format("pylog_bench_memory").option("records", str(n)).load()

        def noop(df):  # type: ignore[no-untyped-def]
            return lambda: df().write.format("noop").mode("overwrite").save()

        assert pylog_df().count() == n  # warm up both paths (Python workers, imports)
        memory_df().count()
        rows = []
        for what, ours, base in (("count()", lambda: pylog_df().count(),
                                  lambda: memory_df().count()),
                                 ("noop sink", noop(pylog_df), noop(memory_df)),
                                 ("count(), consumer", lambda: pylog_df("false").count(),
                                  lambda: memory_df().count())):
            t_base, t_ours = [], []
            for _ in range(args.repeat):  # interleaved rounds
                t_base.append(timed(base))
                t_ours.append(timed(ours))
            rows.append((f"read, {what}", n / min(t_ours), n / min(t_base)))

        create_topic(bootstrap, "bench-out")
        out = spark.range(n).selectExpr(f"CAST(repeat('x', {len(VALUE)}) AS BINARY) AS value")
        out.cache().count()
        write_s = best(args.repeat, lambda: out.write.format("pylog")
                       .option("kafka.bootstrap.servers", bootstrap)
                       .option("topic", "bench-out").mode("append").save())
        produce_s = min(produce_s, produce(bootstrap, "bench-out", n))
        rows.append(("write", n / write_s, n / produce_s))

        create_topic(bootstrap, "bench-small")
        produce(bootstrap, "bench-small", 20)
        pylog_ms = stream_trigger_ms(spark, spark.readStream.format("pylog")
                                     .option("kafka.bootstrap.servers", bootstrap)
                                     .option("subscribe", "bench-small")
                                     .option("startingOffsets", "earliest")
                                     .option("maxOffsetsPerTrigger", "1").load(),
                                     os.path.join(data_dir, "ckpt-pylog"))
        memory_ms = stream_trigger_ms(spark, spark.readStream.format("pylog_bench_memory")
                                      .load(), os.path.join(data_dir, "ckpt-memory"))
        print(f"{'path':<26} {'pylog rows/s':>14} {'baseline rows/s':>16} {'ratio':>7}")
        for name, ours, base in rows:
            print(f"{name:<26} {ours:>14,.0f} {base:>16,.0f} {ours / base:>7.2f}")
        print(f"micro-batch of one record: pylog {pylog_ms:.0f} ms, in-memory source "
              f"{memory_ms:.0f} ms (overhead {pylog_ms - memory_ms:+.0f} ms)")
        spark.stop()
    finally:
        sidecar.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
