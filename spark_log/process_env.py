"""Environment set-up shared by the processes spark_log starts (the CLI, brokers, sidecars).

The protocol codecs (kio) import hypothesis when it is installed (the test extra), and
hypothesis caches a character map under `./.hypothesis` of whatever directory the process runs
in: a tool must not write there, and a fresh directory costs seconds to rebuild it. One cache
per user instead; child processes (a sidecar broker) inherit the setting.
"""

from __future__ import annotations

import os
from pathlib import Path


def keep_caches_out_of_cwd() -> None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(cache / "spark_log" / "hypothesis"))
