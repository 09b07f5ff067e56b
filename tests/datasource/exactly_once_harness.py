"""Harness of the exactly-once tests: a pylog -> pylog query run as a child process, so a test
can SIGKILL its driver and its Python workers and restart it from its checkpoint.

The child (`python -m tests.datasource.exactly_once_harness CONFIG_JSON`) starts Spark in local
mode with task retries (`local[2,4]`), reads the input topic with pylog (Trigger.AvailableNow,
maxOffsetsPerTrigger), parses each value as JSON, keeps the events whose kind is not 0, maps
text to upper case and writes the output topic with pylog. Every output row says where it was
written: its value is JSON with the input id, the text and `at` = "batch:task:attempt" (Spark's
micro-batch id, the write task's partition id and its attempt number), set by a pandas UDF that
runs in the write task. The child prints `BATCH <id>` per finished micro-batch and `DONE` when
the query has read everything (`FAILED <error>` and exit code 3 when the query failed).

A fault can be injected in write task 1 of a micro-batch: `inject = {"action": "fail" | "hold",
"marker": path, "batch": id or null}`. From its UDF's second Arrow batch on, the attempt looks
for rows it wrote in the output log (read_uncommitted; PySpark streams a task's batches through
buffers, so the writer gets the first ones only once later ones push them through); once it
finds some, it writes its tag to `marker`, then raises (fail) or blocks until the test kills
the driver (hold). Only the first attempt that finds no marker file does so.

The child runs in a session of its own: every process it starts (the JVM, PySpark's daemons
and workers) stays in that session, which is how the parent finds and ends them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tests.datasource.exactly_once_readers import read_values

REPO = Path(__file__).resolve().parents[2]
HOLD_LIMIT_S = 600  # a held attempt gives up after this (the test kills it long before)
LOOK_S = 3.0  # how long an injecting attempt looks for its rows at each Arrow batch
EXIT_LIMIT_S = 60  # what a killed driver's JVM and workers get to exit on their own
# Spark gives a Python worker it starts without its daemon (the streaming source's runner) a
# fixed 10 s to connect back; an overloaded machine can miss that, and the query fails to start.
START_FAILURE = "Python worker failed to connect back"


# ---- the child driver ----------------------------------------------------------------------


def provenance_udf(inject: dict[str, Any] | None, bootstrap: str, output: str) -> Any:
    """A pandas UDF giving every row "batch:task:attempt" (and injecting `inject`)."""
    from pyspark.sql.functions import pandas_udf

    calls = {"n": 0}  # per task: the UDF is deserialized again for every task

    @pandas_udf("string")  # type: ignore[call-overload]
    def provenance(ids: pd.Series) -> pd.Series:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        tag = f"{batch}:{ctx.partitionId()}:{ctx.attemptNumber()}"
        calls["n"] += 1
        if inject and _injects_here(inject, int(batch), ctx.partitionId(), calls["n"]) \
                and logged(bootstrap, output, tag, LOOK_S):
            Path(inject["marker"]).write_text(tag)
            if inject["action"] == "fail":
                raise RuntimeError(f"injected failure of task attempt {tag}")
            _hold(tag)
        return ids.map(lambda _: tag)

    return provenance


def _injects_here(inject: dict[str, Any], batch: int, task: int, call: int) -> bool:
    wanted = inject.get("batch")
    return (task == 1 and call >= 2 and (wanted is None or wanted == batch)
            and not os.path.exists(inject["marker"]))


def _hold(tag: str) -> None:
    """Block the task (its transaction open, part of its rows written) until killed."""
    deadline = time.monotonic() + HOLD_LIMIT_S
    while time.monotonic() < deadline:
        time.sleep(1)  # nothing to await: the test kills this process
    raise RuntimeError(f"task attempt {tag} was held for {HOLD_LIMIT_S}s and not killed")


def logged(bootstrap: str, topic: str, tag: str, timeout_s: float) -> bool:
    """Whether the log (read_uncommitted) holds a row written by attempt `tag`, polled for up
    to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(row["at"] == tag for row in rows_of(
                read_values(bootstrap, topic, "read_uncommitted", deadline + 30))):
            return True
        time.sleep(0.1)
    return False


def rows_of(values: Any) -> list[dict[str, Any]]:
    """The output rows among `values` (batch barrier records, with empty values, left out)."""
    return [json.loads(v) for v in values if v]


def run_child(config: dict[str, Any]) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import spark_log

    spark = (SparkSession.builder.master("local[2,4]").appName("pylog-exactly-once")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
             .config("spark.sql.streaming.pollingDelay", "10ms").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_log.register(spark)
    source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers",
                                                      config["bootstrap"])
              .option("subscribe", config["input"]).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(config["per_trigger"]))
              .option("groupId", config["group"])
              .option("commitOffsets", "transactional" if config["exactly_once"] else "true")
              .load())
    parsed = source.select(F.from_json(F.col("value").cast("string"),
                                       "id long, kind int, text string").alias("e"))
    tagged = (parsed.where("e.kind != 0")
              .select(F.col("e.id").alias("id"), F.upper("e.text").alias("text"))
              .withColumn("at", provenance_udf(config.get("inject"), config["bootstrap"],
                                               config["output"])(F.col("id"))))
    out = tagged.select(F.col("id").cast("string").alias("key"),
                        F.to_json(F.struct("id", "text", "at")).alias("value"))
    writer = (out.writeStream.format("pylog")
              .option("kafka.bootstrap.servers", config["bootstrap"])
              .option("topic", config["output"])
              .option("checkpointLocation", config["checkpoint"])
              .option("exactlyOnce", str(config["exactly_once"]).lower()))
    if config["exactly_once"]:
        writer = writer.option("sourceGroupId", config["group"])
    query = writer.trigger(availableNow=True).start()
    print("STARTED", flush=True)
    _report_batches(query)
    if query.exception() is not None:
        print(f"FAILED {query.exception()}".replace("\n", " ")[:2000], flush=True)
        sys.exit(3)
    print("DONE", flush=True)
    spark.stop()


def _report_batches(query: Any) -> None:
    """Print a BATCH line per finished micro-batch until the query ends (or fails)."""
    from pyspark.errors import StreamingQueryException

    seen = -1
    while query.isActive:
        progress = query.lastProgress
        if progress and progress["batchId"] != seen:
            seen = progress["batchId"]
            print(f"BATCH {seen}", flush=True)
        try:
            query.awaitTermination(0.05)
        except StreamingQueryException:
            return


# ---- the parent side -----------------------------------------------------------------------


@dataclass
class Child:
    """One run of the child driver. Invariant: `proc` is this test's own child process and
    leads a session of its own, which holds every process the run started."""

    proc: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    _partial: bytes = b""

    @staticmethod
    def start(config: dict[str, Any], log: Path) -> Child:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
        with open(log, "a") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.datasource.exactly_once_harness",
                 json.dumps(config)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=err, env=env, cwd=str(log.parent), start_new_session=True)
        os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        return Child(proc)

    def poll_lines(self) -> list[str]:
        """The lines the child printed since the last call (never blocks)."""
        assert self.proc.stdout is not None
        data = self._partial
        while True:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        *complete, self._partial = data.split(b"\n")
        new = [line.decode() for line in complete if line]
        self.lines += new
        return new

    def batches(self) -> int:
        """How many BATCH lines the child printed so far."""
        self.poll_lines()
        return sum(line.startswith("BATCH") for line in self.lines)

    def done(self) -> bool:
        return "DONE" in self.lines

    def failure(self) -> str | None:
        return next((line for line in self.lines if line.startswith("FAILED")), None)

    def failed_to_start(self) -> bool:
        """The run failed before its first micro-batch, as Spark fails on START_FAILURE."""
        failure = self.failure() or ""
        return START_FAILURE in failure and not self.batches()

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def python_workers(self) -> dict[int, str]:
        return python_workers(self.proc.pid)

    def kill_driver(self) -> None:
        """SIGKILL the driver (this child); its JVM exits when the driver's pipe closes, and
        PySpark's daemons and workers with it. The run's processes still alive after
        EXIT_LIMIT_S are SIGKILLed by pid."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.end()

    def end(self) -> None:
        """Wait (bounded) for the driver and every process of its session to exit, then
        SIGKILL whatever is left of the session."""
        self.proc.wait(EXIT_LIMIT_S)
        self.poll_lines()
        deadline = time.monotonic() + EXIT_LIMIT_S
        while session_processes(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in session_processes(self.proc.pid):
            kill_quietly(pid)
        while session_processes(self.proc.pid):
            assert time.monotonic() < deadline + EXIT_LIMIT_S, "killed processes did not exit"
            time.sleep(0.05)

    def wait(self, timeout_s: float) -> int:
        """Wait for the driver to exit on its own; returns its exit code."""
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError("the child driver did not finish in time") from None
        self.end()
        return self.proc.returncode

    def stop(self) -> None:
        """End this run whatever its state (test clean-up)."""
        if self.proc.poll() is None:
            kill_quietly(self.proc.pid)
        self.end()


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def session_processes(session: int) -> list[int]:
    """Live (not zombie) processes of `session`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields and fields[0] != "Z" and int(fields[3]) == session:
                found.append(int(entry))
    return found


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


# The workers whose death fails something of the query: task workers (read, UDF, write) and
# the driver-side runners of the streaming source, the sink's commits and its write planning.
# (Spark keeps the other runners, used while the query is analysed, idle afterwards.)
BUSY_ROLES = ("pyspark.worker", "pyspark.sql.streaming.python_streaming_source_runner",
              "pyspark.sql.worker.python_streaming_sink_runner",
              "pyspark.sql.worker.write_into_data_source")


def python_workers(driver: int) -> dict[int, str]:
    """PySpark's Python workers of the run led by `driver` whose role is in BUSY_ROLES, by pid
    -> role (the worker module). Not the daemons that fork workers: a forked worker shares its
    daemon's command line, so a daemon is a `pyspark.daemon` whose parent is not one."""
    workers = {}
    for pid in session_processes(driver):
        cmd, fields = _cmdline(pid), _stat(pid)
        role = next((arg.decode() for arg in cmd if arg.decode() in BUSY_ROLES), None)
        if pid == driver or role is None or fields is None:
            continue
        if b"pyspark.daemon" in cmd and b"pyspark.daemon" not in _cmdline(int(fields[1])):
            continue
        workers[pid] = role
    return workers


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    run_child(json.loads(sys.argv[1]))
