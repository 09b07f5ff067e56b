"""What is parked on a partition until it changes (the role of Kafka's delayed-operation
purgatory): long-polling fetches and acks=all produces wait here; every append, high watermark
move, ISR change and leadership change of the partition wakes them, and each looks again."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class PartitionWaiters:
    """Invariant: a waiter is registered under its partitions only while it waits; a woken
    waiter is resolved exactly once. Event-loop only."""

    def __init__(self) -> None:
        self._waiting: defaultdict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of `partitions` changes, or after `timeout_s`."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        # A timer instead of asyncio.wait_for: cancelling the fetch (shutdown) must never be
        # swallowed by a timeout firing at the same moment.
        timer = loop.call_later(timeout_s, _resolve, waiter)
        keys = list(partitions)
        for key in keys:
            self._waiting[key].add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiting[key]

    def wake(self, key: TopicPartition) -> None:
        waiters = self._waiting.pop(key, None)
        if waiters:
            for waiter in waiters:
                _resolve(waiter)

    def wake_all(self) -> None:
        for key in list(self._waiting):
            self.wake(key)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
