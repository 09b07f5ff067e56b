"""A node's shutdown that takes long says what it waits on: every other task's stack is logged
each interval until the shutdown ends."""

from __future__ import annotations

import asyncio
import logging

from spark_log.broker.node import _report_slow_shutdown

WATCH_LOG = logging.getLogger("spark_log.broker.node")


async def waits_for_a_peer(never: asyncio.Event) -> None:
    await never.wait()


class _Collect(logging.Handler):
    """Keeps the watch's messages and says when `wanted` of them came."""

    def __init__(self, wanted: int) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.wanted, self.enough = wanted, asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if len(self.messages) >= self.wanted:
            self.enough.set()


def test_a_slow_shutdown_logs_where_its_tasks_wait() -> None:
    async def scenario() -> list[str]:
        collect = _Collect(wanted=2)
        WATCH_LOG.addHandler(collect)
        stuck = asyncio.create_task(waits_for_a_peer(asyncio.Event()))
        watch = asyncio.create_task(_report_slow_shutdown(0.05))
        try:
            await asyncio.wait_for(collect.enough.wait(), 10)
        finally:
            WATCH_LOG.removeHandler(collect)
            watch.cancel()
            stuck.cancel()
            await asyncio.gather(watch, stuck, return_exceptions=True)
        return collect.messages

    messages = asyncio.run(scenario())
    assert len(messages) >= 2, "logged once each interval while the shutdown runs"
    assert all("waits_for_a_peer" in m and "never.wait()" in m for m in messages)
    assert not any("_report_slow_shutdown" in m for m in messages)  # not its own stack
