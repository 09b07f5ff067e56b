"""jobs/stream_etl.py end to end against a broker process: per-window statistics equal what
the generator produced (append mode: each final window once; update mode: the latest record
per window, across a restart from the checkpoint), the watermark drops events that come too
late, malformed values are skipped, and a continuous run stops at --timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs import generate_events, stream_etl, window_stats
from jobs.arguments import epoch_ms
from jobs.events import Event, StreamSpec, synthesize
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import unique
from tests.jobs import expected, topics
from tests.jobs.conftest import run_script

pytestmark = pytest.mark.spark

START_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z
MINUTE_MS = 60_000


def produce(bootstrap: str, topic: str, events: list[Event]) -> None:
    generate_events.produce(bootstrap, topic, events, rate=None)


def source(bootstrap: str, spec: StreamSpec, partitions: int = 3) -> tuple[str, list[Event]]:
    """A new topic holding the spec's events."""
    topic = topics.create(bootstrap, unique("clicks"), partitions)
    events = list(synthesize(spec))
    produce(bootstrap, topic, events)
    return topic, events


def etl_args(bootstrap: str, topic: str, output: str, checkpoint: Path, *extra: str) -> list[str]:
    return ["--topic", topic, "--output-topic", output, "--checkpoint", str(checkpoint),
            "--window", "1 minute", "--watermark", "2 minutes",
            "--bootstrap-server", bootstrap, *extra]


def latest_per_key(bootstrap: str, topic: str) -> dict[str, bytes]:
    return {r.key.decode(): r.value for r in topics.read_all(bootstrap, topic)
            if r.key is not None and r.value is not None}


def assert_users_close(got: int, want: int) -> None:
    """`users` is approx_count_distinct (HyperLogLog++, 5% relative standard deviation)."""
    assert abs(got - want) <= max(2, want * 0.1), (got, want)


def test_append_mode_writes_each_final_window_once_and_commits_the_group_in_its_txns(
        shared_broker: BrokerProcess, tmp_path: Path) -> None:
    spec = StreamSpec(count=2400, rate=10, start_ms=START_MS, seed=21, late_fraction=0.1,
                      max_lateness_s=50)
    topic, events = source(shared_broker.bootstrap, spec)
    _produce_malformed(shared_broker.bootstrap, topic)
    output = unique("stats")
    done = run_script("stream_etl.py", "--available-now",
                      *etl_args(shared_broker.bootstrap, topic, output, tmp_path / "ckpt"),
                      data_dir=tmp_path / "sidecar")
    assert f"stopped: {len(events) + 2} rows in" in done.stdout
    assert "append mode, exactly once" in done.stdout
    # read-process-write: the group's offsets were committed in the sink's transactions
    group = f"stream_etl.{output}"
    assert topics.committed(shared_broker.bootstrap, group, topic) == \
        topics.end_offsets(shared_broker.bootstrap, topic)
    watermark = max(e.event_time_ms for e in events) - 2 * MINUTE_MS
    want = {k: s for k, s in expected.windows(events, MINUTE_MS).items()
            if epoch_ms(k) + MINUTE_MS <= watermark}
    records = topics.read_all(shared_broker.bootstrap, output)
    assert sorted(r.key.decode() for r in records if r.key) == sorted(want)  # once each
    for record in records:
        stats = want[record.key.decode()]  # type: ignore[union-attr]
        assert expected.result_numbers(record.value or b"") == stats.exact()
        assert_users_close(json.loads(record.value or b"")["users"], len(stats.users))


def test_update_mode_latest_record_per_window_equals_the_generated_counts_across_a_restart(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    spec = StreamSpec(count=2000, rate=10, start_ms=START_MS, seed=22, late_fraction=0.1,
                      max_lateness_s=50)
    events = list(synthesize(spec))
    topic = topics.create(shared_broker.bootstrap, unique("clicks"), 3)
    output = unique("stats")
    argv = ["--available-now", "--output-mode", "update", "--max-offsets-per-trigger", "700",
            *etl_args(shared_broker.bootstrap, topic, output, tmp_path / "ckpt")]
    produce(shared_broker.bootstrap, topic, events[:1200])
    first = stream_etl.run(stream_etl.parser().parse_args(argv), spark)
    produce(shared_broker.bootstrap, topic, events[1200:])
    second = stream_etl.run(stream_etl.parser().parse_args(argv), spark)
    assert [sum(p.numInputRows for p in q.recentProgress) for q in (first, second)] \
        == [1200, 800]
    assert max(p.numInputRows for p in second.recentProgress) <= 700
    want = expected.windows(events, MINUTE_MS)
    latest = latest_per_key(shared_broker.bootstrap, output)
    assert sorted(latest) == sorted(want)  # every window, open ones too
    assert {k: expected.result_numbers(v) for k, v in latest.items()} \
        == {k: s.exact() for k, s in want.items()}
    read_back = window_stats.read_latest(
        spark, {"kafka.bootstrap.servers": shared_broker.bootstrap}, output).collect()
    assert [r.events for r in read_back] == [s.events for s in want.values()]
    for row, stats in zip(read_back, want.values(), strict=True):
        assert_users_close(row.users, len(stats.users))


def test_events_later_than_the_watermark_are_dropped(spark, shared_broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    spec = StreamSpec(count=900, rate=5, start_ms=START_MS, seed=23, late_fraction=0.0)
    topic, events = source(shared_broker.bootstrap, spec, partitions=1)
    output = unique("stats")
    argv = ["--available-now", "--output-mode", "update",
            *etl_args(shared_broker.bootstrap, topic, output, tmp_path / "ckpt")]
    stream_etl.run(stream_etl.parser().parse_args(argv), spark)
    before = latest_per_key(shared_broker.bootstrap, output)
    arrival = events[-1].arrival_ms + 1000
    too_late = [Event(f"late-{i}", "u9999", "u9999-0", "purchase", "/checkout/complete",
                      "p001", None, START_MS - 10 * MINUTE_MS, arrival) for i in range(4)]
    produce(shared_broker.bootstrap, topic, too_late)
    again = stream_etl.run(stream_etl.parser().parse_args(argv), spark)
    # Spark counts the rows the state store refused: the late events after partial aggregation.
    dropped = sum(op.numRowsDroppedByWatermark for p in again.recentProgress
                  for op in p.stateOperators)
    assert dropped >= 1
    assert sum(p.numInputRows for p in again.recentProgress) == 4
    assert latest_per_key(shared_broker.bootstrap, output) == before
    assert expected.window_key(START_MS - 10 * MINUTE_MS) not in before


def test_a_continuous_run_stops_at_timeout_with_the_windows_so_far(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    spec = StreamSpec(count=300, rate=10, start_ms=START_MS, seed=24)
    topic, events = source(shared_broker.bootstrap, spec, partitions=2)
    output = unique("stats")
    argv = ["--processing-time", "1 second", "--timeout", "45", "--output-mode", "update",
            *etl_args(shared_broker.bootstrap, topic, output, tmp_path / "ckpt")]
    query = stream_etl.run(stream_etl.parser().parse_args(argv), spark)
    assert not query.isActive
    want = expected.windows(events, MINUTE_MS)
    got = {k: expected.result_numbers(v)
           for k, v in latest_per_key(shared_broker.bootstrap, output).items()}
    assert got == {k: s.exact() for k, s in want.items()}


def test_a_missing_input_topic_is_a_clear_error_before_spark_runs(
        shared_broker: BrokerProcess, tmp_path: Path) -> None:
    args = stream_etl.parser().parse_args(etl_args(shared_broker.bootstrap, "no-such-topic",
                                                   "out", tmp_path / "ckpt"))
    with pytest.raises(SystemExit, match="topic 'no-such-topic' does not exist"):
        stream_etl.run(args, spark=None)


def _produce_malformed(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"not json", b'{"unexpected": 1}'):
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def test_a_bad_sink_option_is_one_error_line_and_exit_code_1(
        shared_broker: BrokerProcess, tmp_path: Path) -> None:
    import subprocess
    import sys

    topic, _ = source(shared_broker.bootstrap, StreamSpec(count=10, rate=10, start_ms=START_MS,
                                                          seed=23))
    done = subprocess.run(
        [sys.executable, "jobs/stream_etl.py", "--available-now", "--sink-option",
         "exactlyOnce=maybe", *etl_args(shared_broker.bootstrap, topic, unique("stats"),
                                        tmp_path / "ckpt")],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "stream_etl failed: " in done.stdout
    assert "Option 'exactlyOnce' must be 'true' or 'false', got 'maybe'" in done.stdout
    assert "Traceback" not in done.stdout
