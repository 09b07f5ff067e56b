"""spark_log loads its protocol codecs (kio) without Hypothesis in a process that has not loaded
it already: a fresh Spark Python worker would otherwise spend seconds building strategies."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = ("import sys, spark_log.protocol, spark_log.records, kio.index; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hypothesis'))")


def test_a_fresh_process_loads_the_codecs_without_hypothesis() -> None:
    assert importlib.util.find_spec("hypothesis") is not None  # installed, so kio would load it
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_process_that_loaded_hypothesis_keeps_kios_strategies() -> None:
    probe = ("import hypothesis, spark_log.protocol, kio.static._phantom as phantom; "
             "print(phantom.hypothesis is not None)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
