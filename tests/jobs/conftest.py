"""Fixtures for the jobs' tests: a Spark session shared by the in-process job runs (the one the
test run already has, or one built as the jobs build theirs), and job scripts run the way users
run them (`python jobs/NAME.py ...` from the repository root)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from jobs import spark_session

    with spark_session.running("jobs-tests", "local[2]", 2) as session:
        yield session


def run_script(name: str, *args: str, data_dir: Path,
               timeout_s: float = JOB_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """`python jobs/NAME.py ARGS` from the repository root; fails the test with the job's
    output when it exits non-zero. `data_dir` is the default sidecar directory of the run (so
    nothing touches ~/.spark_log)."""
    env = {**os.environ, "SPARK_LOG_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, f"jobs/{name}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, (f"jobs/{name} exited with {done.returncode}\n"
                                  f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-6000:]}")
    return done
