"""How spark_log loads its protocol codecs (kio) in every process that imports it.

kio registers Hypothesis strategies for its value types whenever Hypothesis is importable (it is
in a test environment, and in many development ones). Importing Hypothesis and building those
strategies costs a fresh process one to several seconds: it computes a Unicode character map and
caches it under `./.hypothesis` of the current directory, which is new in every Spark Python
worker. No spark_log process uses the strategies, so kio's phantom-type module is loaded with
Hypothesis hidden. A process that has loaded Hypothesis already (a test run) keeps kio's
strategies.
"""

from __future__ import annotations

import sys


def load_kio_without_hypothesis() -> None:
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes `import` raise
    try:
        import kio.static._phantom  # noqa: F401  (records that Hypothesis is absent)
    finally:
        del sys.modules["hypothesis"]
