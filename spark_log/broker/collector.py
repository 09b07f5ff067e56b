"""The broker process's cyclic garbage collector: off while the node starts, then on again with
what start-up left alive moved straight to its oldest generation.

A start loads every partition's log and replays the metadata log, and nearly everything it
allocates lives as long as the process. With the collector on, each quarter of growth of the
heap set off a full pass over all of it: about eleven while a broker of 10,000 partitions
started after SIGKILL, 2.6 s of a 14 s start (docs/benchmarks.md, the start-up section's sixth
round). Reference counting still frees what start-up drops. What it cannot free, reference
cycles, start-up leaves few of (40 objects there).

Switched back on as it was, the collector would find the 400,000 objects start-up made in its
youngest generation and scan them three times over as they aged. `gc.freeze` then `gc.unfreeze`
moves them to the oldest generation unscanned instead, so the first full pass after start-up is
the only one that scans them. They are not left frozen: a cycle among them that dies later (a
deleted partition's log and its lookups) must still be collected.

Only the broker's own process does this (`python -m spark_log.broker`, `spark-log broker`): the
collector is the whole process's, and a process that merely imports spark_log (a test, a Spark
driver) keeps its collector as it was.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def pause_for_start() -> None:
    gc.disable()


def resume_after_start() -> None:
    gc.freeze()
    moved = gc.get_freeze_count()
    gc.unfreeze()
    gc.enable()
    log.debug("The collector resumes; %d objects alive after start-up moved to its oldest "
              "generation", moved)
