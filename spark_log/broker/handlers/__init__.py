"""Request handlers, one module per API family (as franz-go's kfake keeps them).

A handler is `async def handle(ctx, request) -> dict | list | None`: a version-independent dict
that the dispatcher builds into the response entity of the request's version, ready frame parts,
or None when no response is due (acks=0). `HANDLERS` maps API keys to handlers.
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


def load_all() -> dict[int, Handler]:
    """Import every handler module so that each registers its API keys."""
    from . import (  # noqa: F401
        api_versions,
        configs,
        fetch,
        groups,
        list_offsets,
        log_dirs,
        metadata,
        offsets,
        produce,
        producer_ids,
        topics,
        transaction_admin,
        transactions,
    )

    return HANDLERS
