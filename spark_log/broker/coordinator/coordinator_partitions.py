"""Which partitions of its internal topic a coordinator (group or transaction) serves: those the
cluster metadata says this broker leads, each loaded in the background when the broker becomes
its leader and unloaded when it stops leading it (Kafka's onElection / onResignation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

LOAD_WAIT_S = 5.0  # how long FindCoordinator waits for a partition led here to load


class CoordinatorPartitions:
    """Invariants: `loading` and `loaded` are disjoint and hold only partitions in `led`; a
    partition loads at most once at a time; nothing loads before `start` or after `stop`.
    Event-loop only.

    `load(partition)` replays the partition and says whether it is now served here;
    `unload(partition)` forgets whatever of it is in memory (also what a cancelled load read).
    """

    def __init__(self, load: Callable[[int], Awaitable[bool]], unload: Callable[[int], None],
                 loading: set[int], loaded: set[int]) -> None:
        self._load, self._unload = load, unload
        self.loading, self.loaded = loading, loaded
        self.led: dict[int, int] = {}  # partition -> leader epoch, as the metadata says
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._active = False

    def start(self) -> None:
        self._active = True
        for partition in sorted(self.led):
            self._begin(partition)

    async def stop(self) -> None:
        self._active = False
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    def elected(self, partition: int, leader_epoch: int) -> None:
        """This broker leads `partition` now: load it (once)."""
        self.led[partition] = leader_epoch
        if self._active and partition not in self.loaded and partition not in self.loading:
            self._begin(partition)

    def resigned(self, partition: int) -> bool:
        """Another broker leads `partition` now, or nobody does: stop loading it and unload
        it. Whether it had been loaded."""
        if self.led.pop(partition, None) is None:
            return False
        task = self._tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        was_loaded = partition in self.loaded
        self.loading.discard(partition)
        self.loaded.discard(partition)
        self._unload(partition)
        return was_loaded

    async def until_loaded(self, partition: int, timeout_s: float = LOAD_WAIT_S) -> None:
        """Wait (bounded) for the load of `partition` under way, if any — so the answer to
        FindCoordinator finds the partition ready for the client's next request."""
        task = self._tasks.get(partition)
        if task is not None:
            await asyncio.wait([task], timeout=timeout_s)

    def _begin(self, partition: int) -> None:
        self.loading.add(partition)
        self._tasks[partition] = asyncio.create_task(self._run(partition))

    async def _run(self, partition: int) -> None:
        try:
            served = await self._load(partition)
        except asyncio.CancelledError:
            self._unload(partition)
            raise
        finally:
            if self._tasks.get(partition) is asyncio.current_task():
                del self._tasks[partition]
                self.loading.discard(partition)
        if served and partition in self.led:
            self.loaded.add(partition)
