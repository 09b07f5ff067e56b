"""A node's shutdown that takes long says what it waits on: every other task's stack is logged
each interval until the shutdown ends."""

from __future__ import annotations

import asyncio
import logging

import pytest

from spark_log.broker.node import _report_slow_shutdown


async def waits_for_a_peer(never: asyncio.Event) -> None:
    await never.wait()


def test_a_slow_shutdown_logs_where_its_tasks_wait(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[str]:
        stuck = asyncio.create_task(waits_for_a_peer(asyncio.Event()))
        watch = asyncio.create_task(_report_slow_shutdown(0.05))
        for _ in range(200):  # bounded: 200 x 20 ms
            if len(caplog.records) >= 2:
                break
            await asyncio.sleep(0.02)
        watch.cancel()
        stuck.cancel()
        await asyncio.gather(watch, stuck, return_exceptions=True)
        return [r.getMessage() for r in caplog.records]

    with caplog.at_level(logging.WARNING, logger="spark_log.broker.node"):
        messages = asyncio.run(scenario())
    assert len(messages) >= 2, "logged once each interval while the shutdown runs"
    assert all("waits_for_a_peer" in m and "never.wait()" in m for m in messages)
    assert not any("_report_slow_shutdown" in m for m in messages)  # not its own stack
