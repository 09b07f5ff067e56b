"""The embedded sidecar broker: start, reuse, concurrent starts, stale files, stop, and Spark
jobs that name no bootstrap servers at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_log import sidecar

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A sidecar data directory; whatever broker runs for it is stopped (by its pid) at the
    end."""
    path = tmp_path / "sidecar-data"
    yield path
    sidecar.stop(path)


def test_ensure_running_starts_once_and_then_reuses(data_dir: Path) -> None:
    assert sidecar.find(data_dir) is None
    address = sidecar.ensure_running(data_dir)
    status = sidecar.status(data_dir)
    assert status.running and status.address == address
    assert address.startswith("127.0.0.1:")
    assert sidecar.ensure_running(data_dir) == address
    assert sidecar.status(data_dir).pid == status.pid
    assert (data_dir / "sidecar.log").exists()


def test_environment_variable_chooses_the_data_dir(data_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sidecar.ENV_DATA_DIR, str(data_dir))
    assert sidecar.resolve_data_dir() == data_dir.resolve()
    monkeypatch.delenv(sidecar.ENV_DATA_DIR)
    assert sidecar.resolve_data_dir() == (Path.home() / ".spark_log" / "data").resolve()


def test_concurrent_starts_end_with_one_broker(data_dir: Path) -> None:
    code = "import sys; from spark_log import sidecar; print(sidecar.ensure_running(sys.argv[1]))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(data_dir)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    addresses = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(addresses) == 1
    assert sidecar.find(data_dir) in addresses


def test_stale_files_of_a_dead_broker_are_replaced(data_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    data_dir.mkdir(parents=True)
    (data_dir / "broker.json").write_text(json.dumps({"pid": dead.pid, "host": "127.0.0.1",
                                                      "port": 1}))
    assert sidecar.find(data_dir) is None
    address = sidecar.ensure_running(data_dir)
    assert address != "127.0.0.1:1"
    assert sidecar.status(data_dir).pid != dead.pid


@pytest.mark.parametrize("content", [b"{\"pid\": \"12x\", \"host\": 1}", b"\xff\xfe", b"[]"])
def test_a_damaged_broker_json_names_no_broker(data_dir: Path, content: bytes) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / "broker.json").write_bytes(content)
    assert not sidecar.status(data_dir).running and sidecar.find(data_dir) is None


def test_a_restarted_sidecar_keeps_its_port(data_dir: Path) -> None:
    first = sidecar.ensure_running(data_dir)
    assert sidecar.stop(data_dir)
    assert sidecar.ensure_running(data_dir) == first


def test_stop_ends_the_broker(data_dir: Path) -> None:
    sidecar.ensure_running(data_dir)
    pid = sidecar.status(data_dir).pid
    assert sidecar.stop(data_dir) is True
    assert sidecar.find(data_dir) is None
    assert not (data_dir / "broker.json").exists()
    assert pid is not None
    assert _ended(pid)
    assert sidecar.stop(data_dir) is False


def _ended(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (one read of /proc, so no race with reaping)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


SECOND_JOB = textwrap.dedent("""
    import os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import spark_log
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark_log.register(spark)
    df = spark.read.format("pylog").option("subscribe", sys.argv[1]).load()
    print("VALUES", sorted(r.v for r in df.selectExpr("CAST(value AS STRING) v").collect()))
    spark.stop()
""")


@pytest.mark.spark
def test_jobs_without_bootstrap_servers_share_the_sidecar(spark, data_dir: Path) -> None:
    topic = "sidecar-events"
    rows = spark.createDataFrame([("a",), ("b",), ("c",)], "value string")
    (rows.write.format("pylog").option("dataDir", str(data_dir)).option("topic", topic)
     .mode("append").save())
    pid = sidecar.status(data_dir).pid
    assert pid is not None
    read = (spark.read.format("pylog").option("dataDir", str(data_dir))
            .option("subscribe", topic).load())
    assert sorted(r.v for r in read.selectExpr("CAST(value AS STRING) v").collect()) == [
        "a", "b", "c"]
    env = {**os.environ, sidecar.ENV_DATA_DIR: str(data_dir)}
    second = subprocess.run([sys.executable, "-c", SECOND_JOB, topic], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "VALUES ['a', 'b', 'c']" in second.stdout
    assert sidecar.status(data_dir).pid == pid  # the second process reused the same broker
