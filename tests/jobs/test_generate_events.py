"""jobs/generate_events.py: the clickstream it produces (keys, JSON values, timestamps, late and
out-of-order events), determinism with --seed, pacing at --rate, and the sidecar default."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

from jobs import generate_events
from jobs.events import EVENT_TYPES, StreamSpec, iso_ms, synthesize
from spark_log import sidecar
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import unique
from tests.jobs import topics
from tests.jobs.conftest import run_script

START = "2024-05-01T12:00:00Z"
START_MS = 1_714_564_800_000


def test_script_produces_count_json_events_keyed_by_user_with_arrival_timestamps(
        shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("clicks")
    done = run_script("generate_events.py", "--topic", topic, "--count", "600", "--rate", "20",
                      "--burst", "--seed", "11", "--start-time", START, "--partitions", "3",
                      "--bootstrap-server", shared_broker.bootstrap, data_dir=tmp_path)
    assert f"produced 600 events to {topic}" in done.stdout
    records = topics.read_all(shared_broker.bootstrap, topic)
    assert len(records) == 600
    assert {r.partition for r in records} == {0, 1, 2}
    values = [json.loads(r.value or b"") for r in records]
    assert all(r.key == v["user_id"].encode() for r, v in zip(records, values, strict=True))
    assert {v["event_type"] for v in values} == set(EVENT_TYPES)
    assert all((v["amount"] is not None) == (v["event_type"] == "purchase") for v in values)
    arrivals = sorted(r.timestamp for r in records)
    assert arrivals == [START_MS + i * 50 for i in range(600)]  # 20 per second from --start-time
    expected = {(e.key(), e.value(), e.arrival_ms) for e in synthesize(
        StreamSpec(count=600, rate=20, start_ms=START_MS, seed=11))}
    assert {(r.key, r.value, r.timestamp) for r in records} == expected


def test_events_are_out_of_order_and_some_late_within_max_lateness() -> None:
    spec = StreamSpec(count=5000, rate=50, start_ms=START_MS, seed=3, late_fraction=0.05,
                      max_lateness_s=30)
    events = list(synthesize(spec))
    delays = [e.arrival_ms - e.event_time_ms for e in events]
    assert all(0 <= d <= 30_000 for d in delays)
    late = sum(d >= 5_000 for d in delays)
    assert 150 <= late <= 350  # about 5% of 5000
    swapped = sum(a.event_time_ms > b.event_time_ms for a, b in itertools.pairwise(events))
    assert swapped > 1000  # neighbours swap order often: 0-2 s delays at 20 ms spacing


def test_same_seed_and_start_give_the_same_records_and_another_seed_does_not(
        shared_broker: BrokerProcess) -> None:
    produced = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        topic = unique(f"det-{name}")
        generate_events.run(generate_events.parser().parse_args([
            "--topic", topic, "--count", "300", "--burst", "--seed", str(seed),
            "--start-time", str(START_MS), "--bootstrap-server", shared_broker.bootstrap]))
        produced[name] = [(r.partition, r.offset, r.timestamp, r.key, r.value)
                          for r in topics.read_all(shared_broker.bootstrap, topic)]
    assert len(produced["a"]) == 300
    assert produced["a"] == produced["b"]
    assert produced["a"] != produced["c"]


def test_rate_paces_production_in_real_time(shared_broker: BrokerProcess) -> None:
    topic = unique("paced")
    started = time.monotonic()
    result = generate_events.run(generate_events.parser().parse_args([
        "--topic", topic, "--count", "30", "--rate", "20", "--seed", "1",
        "--bootstrap-server", shared_broker.bootstrap]))
    assert time.monotonic() - started >= 29 / 20
    assert result.count == 30
    assert result.last_ms - result.first_ms == 29 * 50  # type: ignore[operator]


def test_without_bootstrap_server_the_sidecar_of_data_dir_is_used(tmp_path: Path) -> None:
    data_dir = tmp_path / "sidecar"
    try:
        result = generate_events.run(generate_events.parser().parse_args([
            "--topic", "clicks", "--duration", "2", "--rate", "50", "--burst",
            "--data-dir", str(data_dir)]))
        address = sidecar.find(data_dir)
        assert address is not None
        assert result.count == 100
        assert len(topics.read_all(address, "clicks")) == 100
        assert iso_ms(result.first_ms or 0).endswith("Z")
    finally:
        sidecar.stop(data_dir)
