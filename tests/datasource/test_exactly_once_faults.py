"""The exactly-once sink under faults: a pylog -> pylog query (parse JSON, filter, map) run as a
child process whose driver and Python workers are SIGKILLed, restarted from its checkpoint,
read the whole time by a read_committed and a read_uncommitted consumer (`exactly_once_harness`,
`exactly_once_readers`)."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce
from tests.datasource.exactly_once_harness import Child, kill_quietly, rows_of
from tests.datasource.exactly_once_readers import SnapshotReader, batch_of, read_values

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 2
RUN_LIMIT_S = 600  # one child run, Spark's start included, on a busy 2-core machine
READ_LIMIT_S = 120
START_ATTEMPTS = 3


@dataclass
class Pipeline:
    """One query's topics, group and checkpoint on a broker of its own; the input holds
    `records` JSON events with ids 0.. and kind id % 4 (the query drops kind 0)."""

    broker: BrokerProcess
    tmp: Path
    records: int
    input: str = "events"
    output: str = "upper"
    group: str = "etl"
    children: list[Child] = field(default_factory=list)
    start_failures: int = 0

    def __post_init__(self) -> None:
        create_topic(self.broker, self.input, PARTITIONS)
        create_topic(self.broker, self.output, PARTITIONS)
        for partition in range(PARTITIONS):
            ids = range(partition, self.records, PARTITIONS)
            produce(self.broker, self.input, [json.dumps(
                {"id": i, "kind": i % 4, "text": f"event-{i}"}) for i in ids],
                partition=partition)

    @property
    def expected(self) -> set[int]:
        return {i for i in range(self.records) if i % 4}

    def start(self, exactly_once: bool, per_trigger: int, until: Callable[[Child], bool],
              inject: dict[str, Any] | None = None) -> Child:
        """Start a run of the query and wait until `until` holds or the run exits. A run Spark
        failed to start (START_FAILURE) is started again, at most START_ATTEMPTS times."""
        config = {"bootstrap": self.broker.bootstrap, "input": self.input,
                  "output": self.output, "group": self.group, "per_trigger": per_trigger,
                  "checkpoint": str(self.tmp / "checkpoint"), "exactly_once": exactly_once,
                  "inject": inject}
        for _ in range(START_ATTEMPTS):
            child = Child.start(config, self.tmp / "child.log")
            self.children.append(child)
            await_condition(lambda c=child: until(c) or c.exited(), RUN_LIMIT_S,
                            "the query run")
            if not (child.exited() and child.failed_to_start()):
                return child
            child.end()
            self.start_failures += 1
            print(f"Spark failed to start the query, started again: {child.failure()}")
        raise AssertionError(f"Spark failed to start the query {START_ATTEMPTS} times")

    def finish(self, exactly_once: bool, per_trigger: int,
               inject: dict[str, Any] | None = None) -> Child:
        """Run the query (from its checkpoint) until it has read everything."""
        child = self.start(exactly_once, per_trigger, lambda _: False, inject)
        code = child.wait(RUN_LIMIT_S)
        assert code == 0 and child.done(), \
            f"the query did not finish ({code}, {child.failure()}):\n{self.log_tail()}"
        return child

    def rows(self, isolation: str) -> list[dict[str, Any]]:
        return rows_of(read_values(self.broker.bootstrap, self.output, isolation,
                                   time.monotonic() + READ_LIMIT_S))

    def log_tail(self) -> str:
        text = (self.tmp / "child.log").read_text(errors="replace")
        return "\n".join(line for line in text.splitlines()[-40:] if "Warning" not in line)


@pytest.fixture
def pipeline_factory(broker: BrokerProcess, tmp_path: Path) -> Iterator[Any]:
    made: list[Pipeline] = []

    def make(records: int) -> Pipeline:
        made.append(Pipeline(broker, tmp_path, records))
        return made[-1]

    yield make
    for pipeline in made:
        for child in pipeline.children:
            child.stop()


def await_condition(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def committed_offsets(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])
    return {tp.partition: tp.offset for tp in answer[group].result(30).topic_partitions}


def input_ends(pipeline: Pipeline) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    from tests.datasource.exactly_once_readers import end_offsets

    admin = AdminClient({"bootstrap.servers": pipeline.broker.bootstrap})
    return end_offsets(admin, pipeline.input, list(range(PARTITIONS)), "read_uncommitted")


def ids_of(rows: list[dict[str, Any]]) -> Counter[int]:
    return Counter(row["id"] for row in rows)


def assert_exactly_once(rows: list[dict[str, Any]], pipeline: Pipeline) -> None:
    ids = ids_of(rows)
    twice = sorted(i for i, n in ids.items() if n > 1)
    assert not twice, f"{len(twice)} ids written more than once, e.g. {twice[:10]}"
    assert set(ids) == pipeline.expected, \
        f"missing {sorted(pipeline.expected - set(ids))[:10]}, " \
        f"unexpected {sorted(set(ids) - pipeline.expected)[:10]}"
    assert all(row["text"] == f"EVENT-{row['id']}" for row in rows)


# ---- random kills ------------------------------------------------------------------------

RECORDS = 200_000
PER_TRIGGER = 5_000  # 40 micro-batches: enough for ten kill points and the replays
KILLS = ["driver"] * 4 + ["worker"] * 6
MAX_KILL_DELAY_S = 2.0


def first_batch(child: Child) -> bool:
    return child.batches() >= 1


@dataclass
class Run:
    """One run of the query and the Python workers killed in it."""

    child: Child
    worker_kills: list[str] = field(default_factory=list)


@pytest.mark.timeout(900)  # ten Spark restarts: 4-5 min on 2 cores, longer beside other tests
def test_query_killed_ten_times_at_random_writes_every_row_exactly_once(
        pipeline_factory: Any) -> None:
    seed = int(os.environ.get("PYLOG_FAULT_SEED") or random.randrange(2**32))
    print(f"fault seed {seed} (PYLOG_FAULT_SEED={seed} repeats the kill choices)")
    rng = random.Random(seed)
    pipeline = pipeline_factory(RECORDS)
    readers = {isolation: SnapshotReader(pipeline.broker.bootstrap, pipeline.output,
                                         PARTITIONS, isolation)
               for isolation in ("read_committed", "read_uncommitted")}
    for reader in readers.values():
        reader.start()
    runs = [Run(pipeline.start(True, PER_TRIGGER, first_batch))]
    for kind in rng.sample(KILLS, len(KILLS)):
        run = _await_kill_point(runs, pipeline, rng, seed)
        at = f"after {run.child.batches()} micro-batch lines of run {len(runs)}"
        if kind == "driver":
            print(f"kill the driver {at}")
            run.child.kill_driver()
            runs.append(Run(pipeline.start(True, PER_TRIGGER, first_batch)))
        else:
            workers = run.child.python_workers()
            assert workers, "no Python worker to kill"
            pid = rng.choice(sorted(workers))
            print(f"kill a Python worker ({workers[pid]}) {at}")
            kill_quietly(pid)
            run.worker_kills.append(workers[pid])
    while runs[-1].child.wait(RUN_LIMIT_S) != 0 or not runs[-1].child.done():
        _check_failure(runs[-1], seed, pipeline)  # a worker kill failed the last run
        runs.append(Run(pipeline.start(True, PER_TRIGGER, first_batch)))
    for reader in readers.values():
        reader.finish()

    rows = pipeline.rows("read_committed")
    assert_exactly_once(rows, pipeline)
    assert committed_offsets(pipeline.broker, pipeline.group, pipeline.input) == \
        input_ends(pipeline)
    final = Counter(batch_of(row) for row in rows)
    committed, uncommitted = readers["read_committed"], readers["read_uncommitted"]
    assert committed.snapshots > 10 and set(committed.observed) == set(final)
    partial = {b: (seen, final[b]) for b, seen in committed.mismatches(final).items()}
    assert not partial, f"seed {seed}: read_committed saw partial micro-batches " \
                        f"(batch: counts seen, final count): {partial}"
    assert uncommitted.mismatches(final), \
        "read_uncommitted never saw a partial or aborted micro-batch: the check is blind"
    print(f"{len(runs)} runs ({pipeline.start_failures} more that Spark failed to start), "
          f"{len(final)} micro-batches, {committed.snapshots} read_committed snapshots, "
          f"{len(uncommitted.mismatches(final))} micro-batches seen partial or with aborted "
          f"rows by read_uncommitted")


def _await_kill_point(runs: list[Run], pipeline: Pipeline, rng: random.Random,
                      seed: int) -> Run:
    """Wait for 0-2 more finished micro-batches of the current run, then a random delay
    into the next; a run that fails meanwhile (after a worker kill) is restarted."""
    while True:
        run = runs[-1]
        _await_batches(run.child, run.child.batches() + rng.randint(0, 2))
        if not run.child.exited():
            time.sleep(rng.uniform(0, MAX_KILL_DELAY_S))  # the kill point itself
        if not run.child.exited():
            return run
        run.child.end()
        assert not run.child.done(), \
            f"the query finished before all kills: lower PER_TRIGGER ({len(runs)} runs)"
        _check_failure(run, seed, pipeline)
        runs.append(Run(pipeline.start(True, PER_TRIGGER, first_batch)))


def _await_batches(child: Child, target: int) -> None:
    await_condition(lambda: child.batches() >= target or child.exited(), RUN_LIMIT_S,
                    f"{target} micro-batch lines")


def _check_failure(run: Run, seed: int, pipeline: Pipeline) -> None:
    """A run may fail only because one of its Python workers was killed."""
    assert run.worker_kills, f"seed {seed}: a run failed on its own: " \
                             f"{run.child.failure()}\n{pipeline.log_tail()}"
    print(f"the run failed after its {', '.join(run.worker_kills)} was killed; restarted")


# ---- a failed task attempt ---------------------------------------------------------------

# Two micro-batches whose write tasks get 15,000 rows each: eight Arrow batches, enough for
# the first ones to reach the writer while the UDF still runs (see exactly_once_harness).
INJECT_RECORDS = 80_000
INJECT_PER_TRIGGER = 40_000


def test_failed_task_attempt_leaves_none_of_its_rows_visible(pipeline_factory: Any) -> None:
    pipeline = pipeline_factory(INJECT_RECORDS)
    marker = pipeline.tmp / "failed-attempt"
    pipeline.finish(True, INJECT_PER_TRIGGER,
                    {"action": "fail", "marker": str(marker), "batch": 1})
    failed = marker.read_text()
    assert failed == "1:1:0"
    committed = pipeline.rows("read_committed")
    assert_exactly_once(committed, pipeline)
    assert not [row for row in committed if row["at"] == failed]
    assert [row for row in committed if row["at"] == "1:1:1"], "the retry wrote nothing"
    uncommitted = pipeline.rows("read_uncommitted")
    assert [row for row in uncommitted if row["at"] == failed], \
        "the failed attempt wrote nothing: the test could not see its rows"


# ---- a driver killed mid-batch, with and without exactly-once ----------------------------


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_driver_killed_after_rows_reach_the_log(pipeline_factory: Any,
                                                exactly_once: bool) -> None:
    """The driver dies while micro-batch 1 is being written: part of its rows are in the log,
    the batch is not committed. The restarted query replays batch 1."""
    pipeline = pipeline_factory(INJECT_RECORDS)
    marker = pipeline.tmp / "held-attempt"
    inject = {"action": "hold", "marker": str(marker), "batch": 1}
    child = pipeline.start(exactly_once, INJECT_PER_TRIGGER, lambda _: marker.exists(),
                           inject)
    assert marker.exists(), f"the query ended before the hold:\n{pipeline.log_tail()}"
    held = {row["id"] for row in pipeline.rows("read_uncommitted")
            if row["at"] == marker.read_text()}
    assert held
    child.kill_driver()
    pipeline.finish(exactly_once, INJECT_PER_TRIGGER, inject)
    committed = pipeline.rows("read_committed")
    if exactly_once:
        assert_exactly_once(committed, pipeline)
        logged = ids_of(pipeline.rows("read_uncommitted"))
        assert all(logged[i] == 2 for i in held), "the held rows were not in the log twice"
    else:
        ids = ids_of(committed)
        assert set(ids) == pipeline.expected
        assert all(ids[i] == 2 for i in held), "at least once: the replay writes them again"
