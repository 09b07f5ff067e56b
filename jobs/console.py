"""What the jobs print: progress lines (stamped with the seconds since the job started, flushed
at once so they interleave correctly with Spark's output) and result tables.
"""

from __future__ import annotations

import time
from typing import Any

_STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {message}", flush=True)


def table(frame: Any, max_rows: int = 60) -> str:
    """A pandas DataFrame as a plain text table (no index), at most `max_rows` rows."""
    if frame.empty:
        return "(no rows)"
    shown = frame.head(max_rows).to_string(index=False)
    more = len(frame) - max_rows
    return shown if more <= 0 else f"{shown}\n... {more} more rows"
