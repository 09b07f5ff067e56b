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


def failure(exc: BaseException, max_lines: int = 20) -> str:
    """`Type: message`, cut to `max_lines` lines (Spark's messages run to pages). An error
    raised in Python code that Spark ran (a data source, a UDF) reaches the driver with its
    traceback inside the message: the line that names that error is the reason."""
    text = f"{type(exc).__name__}: {exc}"
    inner = _python_error(text)
    if inner is not None:
        return inner
    lines = text.splitlines()
    more = f"\n... ({len(lines) - max_lines} more lines)" if len(lines) > max_lines else ""
    return "\n".join(lines[:max_lines]) + more


def _python_error(text: str) -> str | None:
    """The `Type: message` line ending the first Python traceback in `text`, if any."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Traceback (most recent call last):"):
            for after in lines[i + 1:]:
                if after and not after[0].isspace() and ": " in after:
                    return after.strip()
            return None
    return None


def run_reporting(job: str, body: Any) -> int:
    """`body()`'s exit code; a failure is one `JOB failed: reason` line and exit code 1, an
    interrupt exit code 130, instead of a traceback."""
    try:
        return body()
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Exception as exc:
        say(f"{job} failed: {failure(exc)}")
        return 1
