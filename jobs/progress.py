"""Progress lines for streaming queries: one line per micro-batch that did something (rows
read, windows updated, the watermark, late rows dropped), from a StreamingQueryListener.

    with progress.reported(spark, "click-stats"):
        query.awaitTermination()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from jobs.console import say

_NO_WATERMARK = "1970-01-01T00:00:00.000Z"


class _Lines(StreamingQueryListener):
    """Says one line per micro-batch of the query named `name` that read rows or moved state."""

    def __init__(self, name: str) -> None:
        self.name = name

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.name == self.name:
            line = describe(progress)
            if line:
                say(line)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def describe(progress: Any) -> str | None:
    """`batch 3: 512 rows in, 2 windows updated, 1 late row dropped, watermark 12:00:30`, or
    None for a batch that read nothing and changed nothing."""
    operators = progress.stateOperators or []
    updated = sum(op.numRowsUpdated for op in operators)
    dropped = sum(op.numRowsDroppedByWatermark for op in operators)
    if not progress.numInputRows and not updated and not dropped:
        return None
    parts = [f"batch {progress.batchId}: {progress.numInputRows} rows in"]
    if operators:
        parts.append(f"{updated} windows updated")
    if dropped:
        parts.append(f"{dropped} late rows dropped")
    watermark = (progress.eventTime or {}).get("watermark")
    if watermark and watermark != _NO_WATERMARK:
        parts.append(f"watermark {watermark.replace('T', ' ').removesuffix('.000Z')}")
    return ", ".join(parts)


@contextlib.contextmanager
def reported(spark: Any, name: str) -> Iterator[None]:
    """Progress lines for the query `name` while the block runs."""
    listener = _Lines(name)
    spark.streams.addListener(listener)
    try:
        yield
    finally:
        spark.streams.removeListener(listener)
