"""jobs/backfill.py end to end against a broker process: a time range to Parquet (rows equal the
topic's records in that range), an offset range re-published to another topic (keys, values,
headers and partitions kept), the whole topic as bytes, an empty range, and bad ranges."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs import backfill, generate_events
from jobs.events import StreamSpec, synthesize
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import produce, unique
from tests.jobs import topics
from tests.jobs.conftest import run_script

pytestmark = pytest.mark.spark

START_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z


@pytest.fixture(scope="module")
def clicks(shared_broker: BrokerProcess) -> str:
    """600 events, one every 100 ms from START_MS, in 3 partitions."""
    topic = topics.create(shared_broker.bootstrap, unique("clicks"), 3)
    spec = StreamSpec(count=600, rate=10, start_ms=START_MS, seed=31)
    generate_events.produce(shared_broker.bootstrap, topic, synthesize(spec), rate=None)
    return topic


def rows(table_dir: Path) -> set[tuple]:
    table = pq.read_table(table_dir).to_pylist()
    return {(r["partition"], r["offset"], r["key"], r["value"]) for r in table}


def test_script_time_range_to_parquet_holds_exactly_the_records_in_the_range(
        shared_broker: BrokerProcess, clicks: str, tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    done = run_script("backfill.py", "--topic", clicks, "--from", "2024-05-01T12:00:20Z",
                      "--to", "2024-05-01T12:00:40Z", "--output", str(out),
                      "--bootstrap-server", shared_broker.bootstrap,
                      data_dir=tmp_path / "sidecar")
    assert "copied 200 records" in done.stdout
    records = topics.read_all(shared_broker.bootstrap, clicks)
    want = {(r.partition, r.offset, (r.key or b"").decode(), (r.value or b"").decode())
            for r in records if START_MS + 20_000 <= r.timestamp < START_MS + 40_000}
    assert len(want) == 200
    assert rows(out) == want
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["date=2024-05-01"]


def test_offset_range_republished_keeps_keys_values_headers_and_partitions(
        spark, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    source = topics.create(shared_broker.bootstrap, unique("src"), 2)
    for partition in (0, 1):
        produce(shared_broker, source, [f"v{partition}-{i}" for i in range(6)],
                keys=[f"k{i}" for i in range(6)], partition=partition,
                headers=[[("trace", f"t{i}".encode())] for i in range(6)])
    target = topics.create(shared_broker.bootstrap, unique("replay"), 2)
    result = backfill.run(backfill.parser().parse_args([
        "--topic", source, "--starting-offsets", f'{{"{source}":{{"0":2,"1":0}}}}',
        "--ending-offsets", f'{{"{source}":{{"0":5,"1":3}}}}', "--to-topic", target,
        "--keep-partitions", "--bootstrap-server", shared_broker.bootstrap]), spark)
    assert result.records == 6

    def content(records: list[topics.Record]) -> list[tuple]:
        return sorted((r.partition, r.key, r.value, r.headers) for r in records)

    picked = [r for r in topics.read_all(shared_broker.bootstrap, source)
              if (r.partition == 0 and 2 <= r.offset < 5) or (r.partition == 1 and r.offset < 3)]
    assert content(topics.read_all(shared_broker.bootstrap, target)) == content(picked)


def test_whole_topic_as_bytes_and_a_range_after_the_end_copies_nothing(
        spark, shared_broker: BrokerProcess, clicks: str, tmp_path: Path) -> None:
    everything = backfill.run(backfill.parser().parse_args([
        "--topic", clicks, "--output", str(tmp_path / "all"), "--binary",
        "--bootstrap-server", shared_broker.bootstrap]), spark)
    records = topics.read_all(shared_broker.bootstrap, clicks)
    assert everything.records == len(records) == 600
    assert rows(tmp_path / "all") == {(r.partition, r.offset, r.key, r.value) for r in records}
    assert (everything.first_ms, everything.last_ms) == (START_MS, START_MS + 59_900)
    nothing = backfill.run(backfill.parser().parse_args([
        "--topic", clicks, "--from", "2024-05-02T00:00:00Z", "--output",
        str(tmp_path / "none"), "--bootstrap-server", shared_broker.bootstrap]), spark)
    assert nothing.records == 0
    assert not list((tmp_path / "none").rglob("*.parquet"))


@pytest.mark.parametrize("argv, message", [
    (["--from", "2024-05-01T12:00:10Z", "--to", "2024-05-01T12:00:00Z"], "before --to"),
    (["--from", "2024-05-01", "--starting-offsets", "earliest"], "not both"),
])
def test_bad_ranges_are_refused_before_spark_starts(argv: list[str], message: str) -> None:
    args = backfill.parser().parse_args(["--topic", "t", "--output", "/nowhere", *argv])
    with pytest.raises(SystemExit, match=message):
        backfill.range_options(args)
