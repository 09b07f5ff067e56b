"""Running `spark-log` as a user does, against a broker started by hand or the sidecar.

`cli` is parametrized over both targets: with "broker" every command gets `--bootstrap-server`
of a real broker process; with "sidecar" no address is given, SPARK_LOG_DATA_DIR points at a
temporary data directory, the first command starts the embedded broker and the fixture stops
it by its pid at the end. `broker_cli` is the first alone, for error cases and flag variants.
Both brokers live for the whole session, so test modules use distinct topic and group names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_log import sidecar
from tests.broker_process import BrokerProcess

CLI = [sys.executable, "-m", "spark_log.cli.main"]
TIMEOUT_S = 120


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, input=stdin,
                          env=env, timeout=TIMEOUT_S, check=False)


@dataclass
class Cli:
    """`spark-log` bound to one broker: `run(...)` adds what reaches it."""

    mode: str
    data_dir: Path
    bootstrap: str

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, sidecar.ENV_DATA_DIR: str(self.data_dir)}

    def address(self) -> str:
        """Where the broker listens (the sidecar's address, starting it if needed)."""
        return self.bootstrap or sidecar.ensure_running(self.data_dir)

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["--bootstrap-server", self.bootstrap] if self.mode == "broker" else []
        return run_cli(*args, *extra, env=self.env, stdin=stdin)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a command that must succeed."""
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr}"
        return done.stdout

    def json(self, *args: str, stdin: str | None = None) -> object:
        return json.loads(self.ok(*args, "--json", stdin=stdin))


@pytest.fixture(scope="session")
def broker_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """`spark-log` with --bootstrap-server of a broker process started by hand (shared by
    every CLI test module: modules use distinct topic and group names)."""
    tmp = tmp_path_factory.mktemp("cli-broker")
    broker = BrokerProcess(tmp / "data", tmp / "broker.log").start()
    yield Cli("broker", broker.data_dir, broker.bootstrap)
    assert broker.stop() == 0, broker.log()


@pytest.fixture(scope="session")
def sidecar_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """`spark-log` without an address: the sidecar broker of a temporary data directory,
    started by the first command and stopped by its pid at the end."""
    data_dir = tmp_path_factory.mktemp("cli-sidecar") / "data"
    yield Cli("sidecar", data_dir, "")
    assert sidecar.stop(data_dir), "the sidecar broker was never started"


@pytest.fixture(params=["broker", "sidecar"])
def cli(request: pytest.FixtureRequest) -> Cli:
    """Each test twice: against the broker started by hand and against the sidecar."""
    return request.getfixturevalue(f"{request.param}_cli")


def table(stdout: str) -> list[dict[str, str]]:
    """Rows of a plain CLI table (header line, whitespace-separated columns) as dicts."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]
