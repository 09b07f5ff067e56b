"""pylog throughput benchmark; prints ratios measured in one run, not a test.

Read: N records of 100-byte values (two partitions) read into Spark by the pylog source, with
`count()` and with a `noop` sink, against a Python data source that yields Arrow batches of the
same schema from memory (`--memory-batch` rows each). Both are timed in interleaved rounds (best
of `--repeat`), with the CPU time of every process involved (the Spark JVM, its Python workers,
the broker), which varies far less than wall time on a shared machine. Write: N rows written by
`df.write.format("pylog")` against confluent-kafka producing the same rows outside Spark.
Micro-batch overhead: the median trigger time of one-record micro-batches of pylog (a
one-partition topic) against an in-memory streaming source, and of two-record micro-batches of
a two-partition topic (one record, one task per partition); `--stream-rounds` interleaved rounds
after a warm-up query, the median of their medians. The broker is a sidecar broker on a
temporary data directory, stopped at the end.

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


def memory_batches(partition: int, count: int, batch: int = BATCH) -> Iterator[pa.RecordBatch]:
    """What pylog yields for `count` records of one partition, built in memory."""
    from spark_log.datasource.arrow import arrow_schema, spark_schema

    schema = arrow_schema(spark_schema())
    for start in range(0, count, batch):
        n = min(batch, count - start)
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
        return MemoryReader(int(self.options.get("records", BENCH_RECORDS)),
                            int(self.options.get("batch", BATCH)))

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        return OneRowStream()


class MemoryReader(DataSourceReader):
    def __init__(self, records: int, batch: int) -> None:
        self.records = records
        self.batch = batch

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from memory_batches(partition.value, self.records // PARTITIONS, self.batch)


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


def timed_cpu(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its descendants)."""
    from exactly_once_sink import tree_cpu_s

    cpu = tree_cpu_s()
    wall = timed(run)
    return wall, tree_cpu_s() - cpu


def best(repeat: int, run: Callable[[], object]) -> float:
    return min(timed(run) for _ in range(repeat))


def produce(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> float:
    """confluent-kafka producing `count` rows outside Spark, with pylog's producer settings."""
    from confluent_kafka import Producer

    from spark_log.datasource.client import producer_conf

    producer = Producer(producer_conf(bootstrap, {}))
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, None, i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)


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
    parser.add_argument("--memory-batch", type=int, default=BATCH,
                        help="rows per Arrow batch of the in-memory baseline")
    parser.add_argument("--stream-rounds", type=int, default=3)
    parser.add_argument("--parts", default="read,write,stream",
                        help="what to measure, of read, write, stream")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
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
        rows: list[tuple[str, float, float, float, float]] = []
        if "read" in parts or "write" in parts:
            rows = throughput(spark, bootstrap, args, parts)
        if rows:
            print(f"{'path':<26} {'pylog rows/s':>14} {'baseline rows/s':>16} {'ratio':>7}"
                  f" {'CPU us/row':>11} {'baseline':>9} {'CPU ratio':>10}")
        for name, ours, base, cpu_ours, cpu_base in rows:
            cpu = (f" {cpu_ours:>11.2f} {cpu_base:>9.2f} {cpu_base / cpu_ours:>10.2f}"
                   if cpu_ours else "")
            print(f"{name:<26} {ours:>14,.0f} {base:>16,.0f} {ours / base:>7.2f}{cpu}")
        if "stream" in parts:
            micro_batches(spark, bootstrap, data_dir, args.stream_rounds)
        print(f"load average {os.getloadavg()[0]:.1f}")
        spark.stop()
    finally:
        sidecar.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


def throughput(spark, bootstrap: str, args: argparse.Namespace,  # type: ignore[no-untyped-def]
               parts: set[str]) -> list[tuple[str, float, float, float, float]]:
    """(path, pylog rows/s, baseline rows/s, pylog CPU us/row, baseline CPU us/row)."""
    n = args.records
    create_topic(bootstrap, "bench")
    produce_s = produce(bootstrap, "bench", n)
    print(f"records: {n:,} of {len(VALUE)} bytes in {PARTITIONS} partitions; baseline batches "
          f"of {args.memory_batch:,} rows")

    def pylog_df(direct: str = "true"):  # type: ignore[no-untyped-def]
        return (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "bench").option("directFetch", direct).load())

    def memory_df():  # type: ignore[no-untyped-def]
        return (spark.read.format("pylog_bench_memory").option("records", str(n))
                .option("batch", str(args.memory_batch)).load())

    def noop(df):  # type: ignore[no-untyped-def]
        return lambda: df().write.format("noop").mode("overwrite").save()

    rows = []
    if "read" in parts:
        assert pylog_df().count() == n  # warm up both paths (Python workers, imports)
        memory_df().count()
        for what, ours, base in (("count()", lambda: pylog_df().count(),
                                  lambda: memory_df().count()),
                                 ("noop sink", noop(pylog_df), noop(memory_df)),
                                 ("count(), consumer", lambda: pylog_df("false").count(),
                                  lambda: memory_df().count())):
            t_base, t_ours = [], []
            for _ in range(args.repeat):  # interleaved rounds
                t_base.append(timed_cpu(base))
                t_ours.append(timed_cpu(ours))
            rows.append((f"read, {what}", n / min(w for w, _ in t_ours),
                         n / min(w for w, _ in t_base),
                         statistics.median(c for _, c in t_ours) / n * 1e6,
                         statistics.median(c for _, c in t_base) / n * 1e6))
    if "write" in parts:
        create_topic(bootstrap, "bench-out")
        out = spark.range(n).selectExpr(f"CAST(repeat('x', {len(VALUE)}) AS BINARY) AS value")
        out.cache().count()
        write_s = best(args.repeat, lambda: out.write.format("pylog")
                       .option("kafka.bootstrap.servers", bootstrap)
                       .option("topic", "bench-out").mode("append").save())
        produce_s = min(produce_s, produce(bootstrap, "bench-out", n))
        rows.append(("write", n / write_s, n / produce_s, 0.0, 0.0))
    return rows


def micro_batches(spark, bootstrap: str, data_dir: str,  # type: ignore[no-untyped-def]
                  rounds: int) -> None:
    """Median trigger time of small micro-batches: pylog reading one record of a one-partition
    topic, and one record of each partition of a two-partition topic, per batch, against the
    in-memory source's one record; rounds interleaved, in alternating order."""
    create_topic(bootstrap, "bench-small", 1)
    produce(bootstrap, "bench-small", 20, 1)
    create_topic(bootstrap, "bench-small2")
    produce(bootstrap, "bench-small2", 20)

    def pylog(topic: str):  # type: ignore[no-untyped-def]
        return (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "1").load())

    def memory():  # type: ignore[no-untyped-def]
        return spark.readStream.format("pylog_bench_memory").load()

    cases = {"one": lambda: pylog("bench-small"), "two": lambda: pylog("bench-small2"),
             "memory": memory}
    stream_trigger_ms(spark, memory(), os.path.join(data_dir, "ckpt-warm-up"))
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            times[name].append(stream_trigger_ms(spark, cases[name](),
                                                 os.path.join(data_dir, f"ckpt-{name}-{r}")))
    base = statistics.median(times["memory"])
    for label, name in (("one record", "one"), ("two records, two partitions", "two")):
        ours = statistics.median(times[name])
        print(f"micro-batch of {label}: pylog {ours:.0f} ms, in-memory source {base:.0f} ms "
              f"(overhead {ours - base:+.0f} ms); rounds pylog "
              f"{', '.join(f'{t:.0f}' for t in times[name])}, in-memory "
              f"{', '.join(f'{t:.0f}' for t in times['memory'])}")


if __name__ == "__main__":
    sys.exit(main())
