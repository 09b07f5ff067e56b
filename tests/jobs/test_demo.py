"""jobs/demo.py run as the README runs it (`python jobs/demo.py`), twice, on a sidecar broker in
a temporary data directory: each run prints the window statistics of exactly the events it
generated (the first run's topics do not leak into the second), the second run reuses the
sidecar the first one started, and the sidecar is stopped by its pid at the end."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from jobs.events import EVENT_TYPES, Event, StreamSpec, synthesize
from spark_log import sidecar
from tests.jobs import expected, topics
from tests.jobs.conftest import run_script

pytestmark = pytest.mark.spark

RUN_TIMEOUT_S = 420
STOP_DEADLINE_S = 30.0
WINDOW_MS = 5_000
WATERMARK_MS = 10_000
# Late events at most 6 s late, the watermark 10 s behind: no event can arrive behind the
# watermark (it trails the newest event time by more than any event's delay), so every figure
# of a final window is exact.
RATE, DURATION_S, MAX_LATENESS_S = 25, 24, 6
DEMO_ARGS = ("--rate", str(RATE), "--duration", str(DURATION_S), "--window", "5 seconds",
             "--watermark", "10 seconds", "--max-lateness", str(MAX_LATENESS_S),
             "--processing-time", "2 seconds")


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The demo's sidecar data directory; the sidecar the demo leaves running is stopped by
    its pid."""
    path = tmp_path / "sidecar"
    yield path
    running = sidecar.status(path)
    if running.running and running.pid is not None:
        os.kill(running.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_DEADLINE_S
        while sidecar.status(path).running:
            assert time.monotonic() < deadline, f"sidecar pid {running.pid} did not stop"
            time.sleep(0.05)


def run_demo(data_dir: Path, seed: int) -> str:
    done = run_script("demo.py", "--data-dir", str(data_dir), "--seed", str(seed), *DEMO_ARGS,
                      data_dir=data_dir, timeout_s=RUN_TIMEOUT_S)
    return done.stdout


def generated_events(bootstrap: str, seed: int) -> list[Event]:
    """The events in the demo's `clicks` topic, checked to be exactly the generator's stream
    for `seed` (none lost, none twice, none left from another run)."""
    records = topics.read_all(bootstrap, "clicks")
    start_ms = min(r.timestamp for r in records)
    spec = StreamSpec(count=RATE * DURATION_S, rate=RATE, start_ms=start_ms, seed=seed,
                      max_lateness_s=MAX_LATENESS_S)
    events = list(synthesize(spec))
    assert sorted((r.timestamp, r.key, r.value) for r in records) == sorted(
        (e.arrival_ms, e.key(), e.value()) for e in events)
    return events


def printed_table(stdout: str) -> dict[str, dict[str, str]]:
    """The results table the demo printed: window start (HH:MM:SS) -> column -> cell."""
    lines = stdout.split("Window statistics read back from topic", 1)[1].splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.startswith("window_start"))
    header = lines[header_at].split()
    rows = {}
    for line in lines[header_at + 1:]:
        if not line.strip():
            break
        cells = dict(zip(header, line.split(), strict=True))
        rows[cells["window_start"]] = cells
    return rows


def printed_watermark_ms(stdout: str) -> int:
    match = re.search(r"the watermark \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\)", stdout)
    assert match, stdout[-3000:]
    moment = dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def clock(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).strftime("%H:%M:%S")


def assert_table_matches(stdout: str, events: list[Event]) -> None:
    """Every window the final watermark closed is printed, with the generated figures."""
    watermark = max(e.event_time_ms for e in events) - WATERMARK_MS
    assert printed_watermark_ms(stdout) == watermark
    assert "late data dropped" not in stdout
    closed = {start_ms: stats for start_ms, stats in
              ((window_ms(key), stats) for key, stats in
               expected.windows(events, WINDOW_MS).items())
              if start_ms + WINDOW_MS <= watermark}
    rows = printed_table(stdout)
    assert sorted(rows) == sorted(clock(start_ms) for start_ms in closed) and closed
    for start_ms, stats in closed.items():
        row = rows[clock(start_ms)]
        assert row["window_end"] == clock(start_ms + WINDOW_MS)
        got = {"events": int(row["events"]), **{t: int(row[t]) for t in EVENT_TYPES},
               "revenue": Decimal(row["revenue"])}
        assert got == stats.exact(), row
        users = len(stats.users)  # approx_count_distinct: HyperLogLog++, 5% deviation
        assert abs(int(row["users"]) - users) <= max(2, users // 10), (row, users)
    counted = sum(s.events for s in closed.values())
    assert f"{len(events)} events produced, {counted} counted in {len(closed)} final windows" \
        in stdout


def window_ms(key: str) -> int:
    """`2024-05-01T12:00:05Z` -> epoch ms."""
    return int(dt.datetime.fromisoformat(key.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)
def test_demo_twice_prints_each_runs_window_figures_and_reuses_the_sidecar(
        data_dir: Path) -> None:
    first = run_demo(data_dir, seed=101)
    assert "sidecar broker: started" in first
    started = sidecar.status(data_dir)
    assert started.running, "the demo stops its sidecar only with --stop-sidecar"
    assert_table_matches(first, generated_events(started.address or "", seed=101))

    second = run_demo(data_dir, seed=202)
    assert f"sidecar broker: reusing {started.address}" in second
    assert sidecar.status(data_dir).pid == started.pid
    assert_table_matches(second, generated_events(started.address or "", seed=202))
