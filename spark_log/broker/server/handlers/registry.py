"""The table of request handlers: `handles(*api_keys)` registers a handler module's functions.

A handler is `async def handle(ctx, request) -> dict | bytes | None`: a version-independent dict
that the dispatcher builds into the response entity of the request's version, a ready frame, or
None when no response is due (acks=0). Handler modules import this module, never the package, so
loading them (`load_all`) closes no import cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[Any, Any], Awaitable[Any]]
HANDLERS: dict[int, Handler] = {}


def handles(*api_keys: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for key in api_keys:
            if key in HANDLERS:
                raise RuntimeError(f"API key {key} has two handlers")
            HANDLERS[key] = fn
        return fn

    return register
