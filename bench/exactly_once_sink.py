"""pylog's exactly-once streaming sink against its at-least-once mode; prints ratios measured in
one run, not a test.

Streaming queries (Spark local[2], Trigger.AvailableNow, a fresh checkpoint each run) write N
rows of 100-byte values to a two-partition topic with `writeStream.format("pylog")`, in several
micro-batches, with exactlyOnce=false (an idempotent producer per task) and exactlyOnce=true
(a transaction per task, committed by the driver): from an in-memory streaming source (the
sink's own cost), and from a pylog source (read-process-write), there also with sourceGroupId
(the source's offsets committed inside the transactions). Rounds are interleaved, every case
runs once per round against the same sidecar broker; the figures are medians over rounds:
rows/s (N / the summed `triggerExecution` of the run's micro-batches, which include the sink's
driver-side prepare and commit; and N / the query's wall time, start and stop included), batch
durations (median and p90 over every micro-batch of every round), CPU time per row of every
process involved (Spark's JVM and Python workers, the broker: steadier than wall time on a
shared machine), and the ratios exactly-once / at-least-once of each round.
Every run is checked: the output topic holds N rows under read_committed, and with
sourceGroupId the group's committed offsets are the input's end.

Usage, from the repository root:
    PYTHONPATH=. .venv/bin/python bench/exactly_once_sink.py [--rows N] [--batches N] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

PARTITIONS = 2
VALUE = b"x" * 100
CHUNK = 10_000  # rows per Arrow batch of the in-memory source
WARMUP_ROWS = 4_000
MAX_ATTEMPTS = 3
WORKER_START_FAILED = "Python worker failed to connect back"


# ---- the in-memory streaming source -------------------------------------------------------


class RowsSource(DataSource):
    """`rows` rows of `value` in `batches` micro-batches of PARTITIONS partitions, from memory."""

    @classmethod
    def name(cls) -> str:
        return "pylog_bench_rows"

    def schema(self) -> str:
        return "value binary"

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        return RowsStream(int(self.options["rows"]), int(self.options["batches"]))


class RowsStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets count micro-batches; every batch is rows / batches rows."""

    def __init__(self, rows: int, batches: int) -> None:
        self.batches = batches
        self.per_partition = rows // batches // PARTITIONS

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self, start: dict, limit) -> dict:  # type: ignore[no-untyped-def]
        return {"batch": min(start["batch"] + 1, self.batches)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end["batch"] == start["batch"]:
            return []
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for begin in range(0, self.per_partition, CHUNK):
            n = min(CHUNK, self.per_partition - begin)
            yield pa.RecordBatch.from_arrays([pa.array([VALUE] * n, pa.binary())],
                                             names=["value"])

    def commit(self, end: dict) -> None:
        pass


# ---- the cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One way of writing: where the rows come from and the sink's options."""

    name: str
    source: str  # "memory" or "pylog"
    exactly_once: bool
    source_group: bool = False


CASES = (
    Case("memory -> pylog, at-least-once", "memory", False),
    Case("memory -> pylog, exactly-once", "memory", True),
    Case("pylog -> pylog, at-least-once", "pylog", False),
    Case("pylog -> pylog, exactly-once", "pylog", True),
    Case("pylog -> pylog, exactly-once, sourceGroupId", "pylog", True, True),
)
COMPARISONS = ((0, 1), (2, 3), (2, 4))  # (baseline, exactly-once) indexes into CASES


@dataclass
class Runs:
    """Every measured run of one case."""

    rates: list[float] = field(default_factory=list)  # rows / summed batch durations
    wall_rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)  # CPU time per row, every process
    batch_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    """One query: wall time, CPU time of every process involved, micro-batch durations."""

    seconds: float
    cpu_s: float
    batch_ms: list[float]


@dataclass(frozen=True)
class Setup:
    """What every run needs: the session, the broker, sizes and where to put checkpoints."""

    spark: Any
    bootstrap: str
    workdir: str
    batches: int


def source_df(setup: Setup, case: Case, rows: int, topic: str, group: str) -> Any:
    if case.source == "memory":
        return (setup.spark.readStream.format("pylog_bench_rows").option("rows", str(rows))
                .option("batches", str(setup.batches)).load())
    reader = (setup.spark.readStream.format("pylog")
              .option("kafka.bootstrap.servers", setup.bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(-(-rows // setup.batches))))
    if case.source_group:
        reader = reader.option("groupId", group).option("commitOffsets", "transactional")
    return reader.load().select("value")


def run_once(setup: Setup, case: Case, rows: int, source_topic: str, tag: str) -> Run:
    """Run `case` over `rows` rows into a new topic, then check what it left in Kafka."""
    out, group = f"out-{tag}", f"group-{tag}"
    create_topics(setup.bootstrap, [out])
    writer = (source_df(setup, case, rows, source_topic, group).writeStream.format("pylog")
              .option("kafka.bootstrap.servers", setup.bootstrap).option("topic", out)
              .option("checkpointLocation", os.path.join(setup.workdir, f"ckpt-{tag}"))
              .option("exactlyOnce", str(case.exactly_once).lower()))
    if case.source_group:
        writer = writer.option("sourceGroupId", group)
    cpu, started = tree_cpu_s(), time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    run = Run(time.perf_counter() - started, tree_cpu_s() - cpu,
              [float(p["durationMs"]["triggerExecution"]) for p in query.recentProgress
               if p["numInputRows"] > 0])
    check(setup, case, out, group, rows)
    return run


def tree_cpu_s() -> float:
    """CPU seconds used so far by this process and its descendants — the Spark JVM, its Python
    workers, the sidecar broker — counting the children each of them has reaped (Linux /proc).
    On a shared machine CPU time varies far less than wall time."""
    parent, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on
        parent[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    children = defaultdict(list)
    for pid, ppid in parent.items():
        children[ppid].append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += children[pid]
    return total / os.sysconf("SC_CLK_TCK")


def check(setup: Setup, case: Case, out: str, group: str, rows: int) -> None:
    """The run wrote every row once (read_committed), and moved the source group to the end."""
    written = (setup.spark.read.format("pylog").option("kafka.bootstrap.servers", setup.bootstrap)
               .option("subscribe", out).load().count())
    if written != rows:
        raise AssertionError(f"{case.name}: {written} rows in {out}, expected {rows}")
    if case.source_group:
        from spark_log.client.group_offsets import GroupOffsetsClient

        with GroupOffsetsClient(setup.bootstrap) as client:
            committed = sum(offset for offset, _meta in client.fetch(group).values())
        if committed != rows:
            raise AssertionError(f"{case.name}: group {group} committed {committed}, "
                                 f"expected {rows}")


# ---- Kafka set-up -------------------------------------------------------------------------


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS) for n in names]).values():
        future.result(30)


def produce(setup: Setup, topic: str, rows: int) -> None:
    """`rows` values, written by a batch query (not measured)."""
    (setup.spark.range(rows).selectExpr(f"CAST(repeat('x', {len(VALUE)}) AS BINARY) AS value")
     .write.format("pylog").option("kafka.bootstrap.servers", setup.bootstrap)
     .option("topic", topic).mode("append").save())


# ---- report -------------------------------------------------------------------------------


def p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def report(args: argparse.Namespace, results: list[Runs]) -> None:
    per_batch = args.rows // args.batches
    print(f"rows: {args.rows:,} of {len(VALUE)} bytes in {args.batches} micro-batches of "
          f"{per_batch:,}, {PARTITIONS} partitions, local[{PARTITIONS}], {args.repeat} rounds")
    print(f"{'case':<45} {'rows/s':>8} {'wall rows/s':>11} {'CPU us/row':>10} "
          f"{'batch ms':>8} {'p90 ms':>7}")
    for case, runs in zip(CASES, results, strict=True):
        print(f"{case.name:<45} {statistics.median(runs.rates):>8,.0f} "
              f"{statistics.median(runs.wall_rates):>11,.0f} "
              f"{statistics.median(runs.cpu_us):>10.1f} "
              f"{statistics.median(runs.batch_ms):>8.0f} {p90(runs.batch_ms):>7.0f}")
    for base, ours in COMPARISONS:
        a, b = results[base], results[ours]
        ratios = sorted(y / x for x, y in zip(a.rates, b.rates, strict=True))
        cpu = sorted(y / x for x, y in zip(a.cpu_us, b.cpu_us, strict=True))
        cpu_ms = (statistics.median(b.cpu_us) - statistics.median(a.cpu_us)) * per_batch / 1000
        print(f"{CASES[ours].name} / {CASES[base].name}:\n"
              f"  rows/s ratio {statistics.median(ratios):.2f} (rounds {ratios[0]:.2f}-"
              f"{ratios[-1]:.2f}), CPU per row ratio {statistics.median(cpu):.2f} (rounds "
              f"{cpu[0]:.2f}-{cpu[-1]:.2f}); per micro-batch {cpu_ms:+.0f} ms of CPU, "
              f"{statistics.median(b.batch_ms) - statistics.median(a.batch_ms):+.0f} ms median, "
              f"{p90(b.batch_ms) - p90(a.batch_ms):+.0f} ms p90")


# ---- main ---------------------------------------------------------------------------------


def start_spark() -> Any:
    from pyspark.sql import SparkSession

    import spark_log

    spark = (SparkSession.builder.master(f"local[{PARTITIONS}]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(PARTITIONS)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_log.register(spark)
    spark.dataSource.register(RowsSource)
    return spark


def run_retried(setup: Setup, case: Case, rows: int, source_topic: str, tag: str) -> Run:
    """`run_once`, run again (at most twice, said on stderr) when Spark could not start a
    Python worker: it waits a fixed time for one to connect back, which a loaded machine can
    exceed. Any other failure ends the benchmark."""
    for attempt in range(MAX_ATTEMPTS):
        try:
            return run_once(setup, case, rows, source_topic, f"{tag}-{attempt}")
        except Exception as e:
            if WORKER_START_FAILED not in str(e) or attempt + 1 == MAX_ATTEMPTS:
                raise
            print(f"{case.name}: {WORKER_START_FAILED}; running it again", file=sys.stderr,
                  flush=True)
    raise AssertionError("unreachable")


def measure(setup: Setup, args: argparse.Namespace) -> list[Runs]:
    create_topics(setup.bootstrap, ["in", "in-warmup"])
    produce(setup, "in", args.rows)
    produce(setup, "in-warmup", WARMUP_ROWS)
    for i, case in enumerate(CASES):  # Python workers, imports, the commit-log topic
        run_retried(setup, case, WARMUP_ROWS, "in-warmup", f"warmup-{i}")
    results = [Runs() for _ in CASES]
    for r in range(args.repeat):
        order = list(range(len(CASES)))
        order = order[r % len(order):] + order[:r % len(order)]  # no case always runs first
        for i in order:
            run = run_retried(setup, CASES[i], args.rows, "in", f"{r}-{i}")
            results[i].rates.append(args.rows / (sum(run.batch_ms) / 1000))
            results[i].wall_rates.append(args.rows / run.seconds)
            results[i].cpu_us.append(run.cpu_s / args.rows * 1e6)
            results[i].batch_ms.extend(run.batch_ms)
            print(f"round {r + 1}/{args.repeat} {CASES[i].name}: {args.rows / run.seconds:,.0f} "
                  f"rows/s wall, {run.cpu_s:.1f} CPU s", file=sys.stderr, flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000, help="rows per run")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()
    if args.rows % (args.batches * PARTITIONS):
        parser.error(f"--rows must be a multiple of --batches x {PARTITIONS}")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_log import sidecar

    workdir = tempfile.mkdtemp(prefix="pylog-bench-eos-")
    try:
        bootstrap = sidecar.ensure_running(os.path.join(workdir, "data"))
        spark = start_spark()
        results = measure(Setup(spark, bootstrap, workdir, args.batches), args)
        report(args, results)
        spark.stop()
    finally:
        sidecar.stop(os.path.join(workdir, "data"))
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
