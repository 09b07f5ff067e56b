"""The broker process runs its start-up without the cyclic garbage collector, then resumes it
with what start-up left alive in its oldest generation, not frozen (spark_log.broker.collector)."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60

PROBE = """
import gc
from spark_log.broker.collector import pause_for_start, resume_after_start
pause_for_start()
paused = not gc.isenabled()
kept = [[n] for n in range(1000)]  # start-up's long-lived objects
resume_after_start()
oldest = {id(o) for o in gc.get_objects(generation=2)}
print(paused, gc.isenabled(), gc.get_freeze_count() == 0, all(id(k) in oldest for k in kept))
"""


def test_the_collector_pauses_then_resumes_with_start_up_objects_in_its_oldest_generation(
        ) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["True", "True", "True", "True"]


def test_importing_the_broker_leaves_a_process_collector_alone() -> None:
    import spark_log.broker.__main__  # noqa: F401  (what a test or Spark driver may import)

    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_broker_process_resumes_the_collector_once_it_serves(tmp_path: Path) -> None:
    log_path = tmp_path / "broker.log"
    argv = [sys.executable, "-m", "spark_log.broker", "--data-dir", str(tmp_path / "data"),
            "--host", "127.0.0.1", "--port", "0", "--log-level", "DEBUG"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "The collector resumes" not in log_path.read_text() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=START_TIMEOUT_S)
    text = log_path.read_text()
    resumed = re.search(r"The collector resumes; (\d+) objects alive after start-up moved", text)
    assert resumed is not None, text[-2000:]
    assert int(resumed.group(1)) > 10_000  # the node's modules and parts, at least
    assert text.index(" listening on ") < resumed.start()
