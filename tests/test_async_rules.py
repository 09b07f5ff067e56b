"""Waiting with a deadline (spark_log/deadline.py says why): the package waits only through
`within`, which never loses a cancellation inside a task and also works in a request the
broker's connection drives without one."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from spark_log.deadline import within

PACKAGE = Path(__file__).resolve().parent.parent / "spark_log"


def _wait_for_calls(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "wait_for" and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == "asyncio":
            lines.append(node.lineno)
    return lines


def test_only_within_calls_asyncio_wait_for() -> None:
    found = {str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("*.py"))
             if _wait_for_calls(p)}
    assert found == {"spark_log/deadline.py"}


def test_a_timeout_wait_ends_on_a_cancel_that_arrives_with_its_wake_up() -> None:
    """A wake-up and a cancel in the same loop iteration end the loop (the case 3.11's
    wait_for gets wrong: the loop runs on)."""
    async def scenario() -> bool:
        wake = asyncio.Event()
        rounds = 0

        async def loop() -> None:
            nonlocal rounds
            while rounds < 1000:  # bounded: a lost cancel shows as rounds, never as a hang
                await within(10, wake.wait())
                wake.clear()
                rounds += 1

        task = asyncio.create_task(loop())
        await asyncio.sleep(0)  # the task now waits on the event
        wake.set()
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        return task.cancelled()

    assert asyncio.run(scenario())


def _drive(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    """Run `coroutine` as the broker's connection runs a request: stepped from callbacks,
    with no task."""
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def step(_: object = None) -> None:
        try:
            waiting_on = coroutine.send(None)
        except StopIteration as stop:
            done.set_result(stop.value)
        except BaseException as e:  # handed to the awaiting test
            done.set_exception(e)
        else:
            waiting_on._asyncio_future_blocking = False
            waiting_on.add_done_callback(step)

    asyncio.get_running_loop().call_soon(step)
    return done


def test_within_works_in_a_request_driven_without_a_task() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[int] = loop.create_future()
        loop.call_later(0.01, answer.set_result, 7)
        assert await _drive(within(5, answer)) == 7
        with pytest.raises(TimeoutError):
            await _drive(within(0.01, loop.create_future()))

    asyncio.run(scenario())
