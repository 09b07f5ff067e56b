"""`spark-log sidecar status|start|stop` on a data directory of its own, a tool starting the
sidecar when no address is given, and `spark-log perf produce|consume` against a broker
process and the sidecar."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_log import sidecar
from tests.cli.conftest import Cli, run_cli


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sidecar"
    yield path
    sidecar.stop(path)  # whatever a failed test left running


def test_status_start_stop(data_dir: Path) -> None:
    env = {**os.environ, sidecar.ENV_DATA_DIR: str(data_dir)}
    idle = run_cli("sidecar", "status", env=env)
    assert idle.returncode == 3 and "Status: not running" in idle.stdout
    assert sidecar.find(data_dir) is None and not (data_dir / "broker.json").exists()

    started = run_cli("sidecar", "start", "--json", env=env)
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    assert info["running"] is True and info["address"] == sidecar.find(data_dir)
    assert info["data_dir"] == str(data_dir.resolve())

    listed = run_cli("topics", "list", env=env)
    assert listed.returncode == 0 and "Started the sidecar" not in listed.stderr
    status = json.loads(run_cli("sidecar", "status", "--json", env=env).stdout)
    assert (status["running"], status["pid"]) == (True, info["pid"])

    stopped = run_cli("sidecar", "stop", "--data-dir", str(data_dir))
    assert stopped.stdout.strip() == (f"Stopped the sidecar broker (pid {info['pid']}) of "
                                      f"{data_dir.resolve()}.")
    assert run_cli("sidecar", "status", "--data-dir", str(data_dir)).returncode == 3
    again = run_cli("sidecar", "stop", "--data-dir", str(data_dir))
    assert again.returncode == 0 and "No sidecar broker is running" in again.stdout


def test_a_tool_without_address_starts_the_sidecar(data_dir: Path) -> None:
    done = run_cli("topics", "create", "--topic", "first", "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stderr
    address = sidecar.find(data_dir)
    assert address is not None
    assert f"Started the sidecar broker at {address}" in done.stderr
    listed = run_cli("topics", "list", "--bootstrap-server", address)
    assert "first" in listed.stdout.split()
    assert sidecar.stop(data_dir)


def test_perf_produce_and_consume(cli: Cli) -> None:
    cli.ok("topics", "create", "--topic", "perf")
    produced = cli.json("perf", "produce", "--topic", "perf", "--num-records", "500",
                        "--record-size", "64")
    assert (produced["records"], produced["errors"]) == (500, 0)
    consumed = cli.json("perf", "consume", "--topic", "perf", "--messages", "500")
    assert (consumed["records"], consumed["bytes"]) == (500, 500 * 64)
    short = cli.run("perf", "consume", "--topic", "perf", "--num-records", "501",
                    "--timeout", "500", "--json")
    assert short.returncode == 1 and json.loads(short.stdout)["records"] == 500
    assert "Stopped after 500 of 501 records: none came for 500 ms" in short.stderr
    missing = cli.run("perf", "produce", "--topic", "no-perf", "--num-records", "1")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
