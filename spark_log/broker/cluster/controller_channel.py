"""Where a broker sends controller requests (Kafka's NodeToControllerChannelManager): the active
controller — this node's own, in-process, when it is the active one, else the quorum's leader
over its controller listener.

A request is retried while no controller is known or the one asked is not (or no longer)
active (NOT_CONTROLLER), until its timeout; then the last answer is returned, or
`ControllerUnavailable` raised when none came.

As Kafka's brokers keep one channel for the lifecycle (registration and heartbeats), one for
ISR changes and one for forwarded requests, requests go over a connection per lane: a
connection carries one request at a time, and a heartbeat queued behind hundreds of ISR
changes, each waiting for its commit, would let the broker's session expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.client.async_connection import AsyncConnection
from spark_log.deadline import within
from spark_log.protocol import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.05
_LANES = {62: "lifecycle", 63: "lifecycle",  # BrokerRegistration, BrokerHeartbeat
          56: "alter-partition"}  # AlterPartition; everything else is "forwarding"


class LocalController(Protocol):
    async def handle(self, request: RequestPayload) -> ResponsePayload | None: ...


class ControllerUnavailable(Exception):
    """No active controller answered within the request's timeout."""


def is_not_controller(response: Any) -> bool:
    """Whether the answer says the controller asked is not the active one (top level, or in
    every entry of its first list, as CreateTopics and others answer it)."""
    if getattr(response, "error_code", None) == ErrorCode.not_controller:
        return True
    for field in dataclasses.fields(response):
        value = getattr(response, field.name)
        if isinstance(value, tuple) and value and all(
                getattr(item, "error_code", None) == ErrorCode.not_controller for item in value):
            return True
    return False


def lane(request: RequestPayload) -> str:
    """The connection a request goes over: "lifecycle", "alter-partition" or "forwarding"."""
    return _LANES.get(request.__api_key__, "forwarding")


class ControllerChannel:
    """Invariants: one connection per controller and lane, reused; requests to the local
    controller never touch the network. Not thread-safe: the node's event loop."""

    def __init__(self, node_id: int, local: LocalController | None, leader_id: Callable[[], int],
                 addresses: Mapping[int, tuple[str, int]], timeout_ms: int) -> None:
        self.node_id, self.local, self.leader_id = node_id, local, leader_id
        self.addresses, self.timeout_s = dict(addresses), timeout_ms / 1000
        self._connections: dict[tuple[int, str], AsyncConnection] = {}
        self._leader_changed = asyncio.Event()

    def leader_changed(self) -> None:
        """Called on every change of the quorum's leader: wake requests waiting for one."""
        self._leader_changed.set()
        self._leader_changed = asyncio.Event()

    async def call(self, request: RequestPayload, timeout_s: float | None = None
                   ) -> ResponsePayload:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout_s if timeout_s is None else timeout_s)
        last: ResponsePayload | None = None
        while (remaining := deadline - loop.time()) > 0:
            answer = await self._ask(request, remaining)
            if answer is not None and not is_not_controller(answer):
                return answer
            last = answer if answer is not None else last
            await self._wait_for_leader(min(RETRY_BACKOFF_S, max(0.0, deadline - loop.time())))
        if last is not None:
            return last
        raise ControllerUnavailable(f"no active controller answered within "
                                    f"{self.timeout_s if timeout_s is None else timeout_s}s")

    async def _ask(self, request: RequestPayload, remaining: float) -> ResponsePayload | None:
        leader = self.leader_id()
        if leader < 0:
            return None
        if leader == self.node_id:
            return await self.local.handle(request) if self.local is not None else None
        address = self.addresses.get(leader)
        if address is None:
            return None
        key = (leader, lane(request))
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = AsyncConnection(
                *address, f"broker-{self.node_id}-{key[1]}-to-controller")
        try:
            return await connection.call(request, remaining)
        except ConnectionError as e:
            log.debug("controller %d did not answer: %s", leader, e)
            return None

    async def _wait_for_leader(self, timeout_s: float) -> None:
        if timeout_s <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await within(timeout_s, self._leader_changed.wait())

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
