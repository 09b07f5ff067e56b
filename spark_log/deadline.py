"""Waiting with a deadline in asyncio code without losing a cancellation.

CPython 3.11's `asyncio.wait_for` awaits its call in a task of its own; when the caller is
cancelled just as that call completes, it returns the result and the cancellation is lost (3.12
rebuilt it on `asyncio.timeout`). A loop waiting that way for a wake-up then runs on after
`task.cancel()`, and a stop that awaits the loop hangs. `asyncio.timeout` delivers both, but it
needs a task to cancel: a request the broker's connection drives without one (see
`Connection._step`) has none, and nothing can cancel it as a task either, so it keeps
`wait_for`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(timeout_s: float | None, awaitable: Awaitable[T]) -> T:
    """`await awaitable`, raising TimeoutError after `timeout_s` seconds (None: no limit)."""
    if asyncio.current_task() is None:
        return await asyncio.wait_for(awaitable, timeout_s)
    async with asyncio.timeout(timeout_s):
        return await awaitable
