"""Keyed one-shot timeouts on an injectable clock: session, join, sync and delay deadlines.

Scheduling a key that is already scheduled replaces its task, as Kafka's coordinator timer
does, so "reschedule the heartbeat" is just `schedule` again. `run_due()` runs every task whose
deadline has passed (including ones scheduled by those tasks that are already due), in deadline
order; the coordinator calls it from one asyncio task that sleeps until `next_deadline()`, and
unit tests call it after moving a `ManualClock`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable

from spark_log.clock import Clock

log = logging.getLogger(__name__)

Task = Callable[[], None]


class CoordinatorTimer:
    """Invariant: `_tasks[key]` is the one live task of `key`; heap entries whose sequence
    number is not the live one for their key are stale and skipped."""

    def __init__(self, clock: Clock, on_change: Callable[[], None] | None = None) -> None:
        self._clock = clock
        self._tasks: dict[str, tuple[int, int, Task]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()
        self._on_change = on_change

    def schedule(self, key: str, delay_ms: int, task: Task) -> None:
        deadline = self._clock.monotonic_ms() + max(0, delay_ms)
        seq = next(self._seq)
        self._tasks[key] = (deadline, seq, task)
        heapq.heappush(self._heap, (deadline, seq, key))
        if self._on_change is not None:
            self._on_change()

    def cancel(self, key: str) -> None:
        self._tasks.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._tasks

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        """Run every due task; returns how many ran. A failing task is logged and skipped."""
        ran = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > self._clock.monotonic_ms():
                return ran
            _, _, key = heapq.heappop(self._heap)
            _, _, task = self._tasks.pop(key)
            ran += 1
            try:
                task()
            except Exception:
                log.exception("group coordinator timer task %s failed", key)

    def clear(self) -> None:
        self._tasks.clear()
        self._heap.clear()

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _, seq, key = heap[0]
            live = self._tasks.get(key)
            if live is not None and live[1] == seq:
                return
            heapq.heappop(heap)
