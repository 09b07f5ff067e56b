"""The broker process's cyclic garbage collector: off while the node starts, then everything
alive is frozen out of its later passes.

A start loads every partition's log and replays the metadata log, and nearly everything it
allocates lives as long as the process. Each full pass of the collector scans the whole heap,
and it ran about eleven of them while a broker of 10,000 partitions started after SIGKILL:
2.6 s of a 14 s start (docs/benchmarks.md, the start-up section's sixth round). Reference
counting still frees what start-up drops. What it cannot free, reference cycles, start-up
leaves few of: 40 objects there, where one more full pass to find them would cost 0.5 s. So
they are frozen with the rest (`gc.freeze`: moved to the permanent generation), and the
passes of the running broker scan only what it allocated since.

Only the broker's own process does this (`python -m spark_log.broker`, `spark-log broker`):
freezing is for the whole process, and a process that merely imports spark_log (a test, a
Spark driver) keeps its collector as it was.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def pause_for_start() -> None:
    gc.disable()


def resume_after_start() -> None:
    gc.freeze()
    gc.enable()
    log.debug("The collector resumes; %d objects alive after start-up are frozen",
              gc.get_freeze_count())
