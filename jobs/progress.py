"""Progress of streaming queries: one line per micro-batch that did something (rows read,
windows changed, late rows dropped, the watermark), said as it happens by a
StreamingQueryListener, and the totals of a finished query from its recent progress.

    with progress.reported(spark, "click_stats"):
        query.awaitTermination()
    totals = progress.totals(query)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from jobs.console import say

_NO_WATERMARK = "1970-01-01T00:00:00.000Z"


@dataclass(frozen=True)
class Totals:
    """What the micro-batches of a query did (the last 100, as Spark keeps them). `dropped`
    counts rows the watermark kept out of the state, after partial aggregation (per window and
    task), not events."""

    batches: int
    rows_in: int
    dropped: int
    watermark: str | None


class _Lines(StreamingQueryListener):
    """Says one line per micro-batch of the query named `name` that read rows or moved state."""

    def __init__(self, name: str) -> None:
        self.name = name

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        if event.progress.name == self.name:
            line = describe(event.progress)
            if line:
                say(line)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def describe(progress: Any) -> str | None:
    """`batch 3: 512 rows in, 2 windows changed, late data dropped, watermark 12:00:30`, or
    None for a batch that read nothing and changed nothing. (Spark counts late rows after
    partial aggregation, so its count is not one of events.)"""
    operators = progress.stateOperators or []
    changed = sum(op.numRowsUpdated + op.numRowsRemoved for op in operators)
    dropped = _dropped(progress)
    if not progress.numInputRows and not changed and not dropped:
        return None
    parts = [f"batch {progress.batchId}: {plural(progress.numInputRows, 'row')} in"]
    if operators:
        parts.append(f"{plural(changed, 'window')} changed")
    if dropped:
        parts.append("late data dropped")
    watermark = _watermark(progress)
    if watermark:
        parts.append(f"watermark {watermark}")
    return ", ".join(parts)


def totals(query: Any) -> Totals:
    """The totals of `query`'s recent progress (read it once the query has stopped)."""
    batches = query.recentProgress
    marks = [m for m in (_watermark(p) for p in batches) if m]
    return Totals(batches=sum(1 for p in batches if p.numInputRows),
                  rows_in=sum(p.numInputRows for p in batches),
                  dropped=sum(_dropped(p) for p in batches),
                  watermark=marks[-1] if marks else None)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _dropped(progress: Any) -> int:
    return sum(op.numRowsDroppedByWatermark for op in progress.stateOperators or [])


def _watermark(progress: Any) -> str | None:
    """The batch's watermark as `2024-05-01 12:00:30` (UTC), None before the first one."""
    watermark = (progress.eventTime or {}).get("watermark")
    if not watermark or watermark == _NO_WATERMARK:
        return None
    return watermark.replace("T", " ").removesuffix("Z").removesuffix(".000")


@contextlib.contextmanager
def reported(spark: Any, name: str) -> Iterator[None]:
    """Progress lines for the query `name` while the block runs."""
    listener = _Lines(name)
    spark.streams.addListener(listener)
    try:
        yield
    finally:
        spark.streams.removeListener(listener)
