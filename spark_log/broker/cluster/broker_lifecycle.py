"""A broker's membership of the cluster (Kafka's BrokerLifecycleManager): it registers with the
active controller (BrokerRegistration: its incarnation, listeners, features, rack), then keeps
its session alive with BrokerHeartbeat, reporting how far it has applied the metadata log. The
controller unfences it once it has caught up, fences it when heartbeats stop
(`broker.session.timeout.ms`), and moves its leaderships away in a controlled shutdown before
it stops.

While fenced or catching up it heartbeats every few milliseconds (it waits on this to start
serving); once unfenced, every `broker.heartbeat.interval.ms`. Until the broker says it is
`ready_to_unfence` (its publishers have the image from its registration on), the heartbeats ask
to stay fenced, as Kafka's `WantFence` does. A heartbeat refused as stale (the
controller forgot this incarnation, e.g. after a failover with a lost session) registers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spark_log.broker.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from spark_log.deadline import within
from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build

log = logging.getLogger(__name__)

FAST_HEARTBEAT_S = 0.01
STOP_RECHECK_S = 0.1
REGISTRATION_VERSION = 3
HEARTBEAT_VERSION = 1
METADATA_VERSION_RANGE = ("metadata.version", 1, 14)
_RETRIABLE = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out})


@dataclass(frozen=True)
class ListenerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


class BrokerLifecycle:
    """Invariants: `epoch` is the broker epoch of the current registration (-1 before one);
    `fenced` is what the controller last answered; it is never unfenced before
    `ready_to_unfence`. Not thread-safe: the node's event loop."""

    def __init__(self, node_id: int, cluster_id: str, channel: ControllerChannel,
                 listeners: Sequence[ListenerEndpoint], rack: str | None,
                 metadata_offset: Callable[[], int], heartbeat_interval_ms: int,
                 incarnation_id: uuid.UUID) -> None:
        self.node_id, self.cluster_id, self.channel = node_id, cluster_id, channel
        self.listeners, self.rack, self.metadata_offset = list(listeners), rack, metadata_offset
        self.interval_s = heartbeat_interval_ms / 1000
        self.incarnation_id = incarnation_id
        self.epoch = -1
        self.fenced = True
        self.ready_to_unfence = False
        self._shutting_down = False
        self._registered = asyncio.Event()
        self._should_shut_down = asyncio.Event()
        self._unfenced = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def wait_registered(self, timeout_s: float) -> bool:
        return await _waited(self._registered, timeout_s)

    async def wait_unfenced(self, timeout_s: float) -> bool:
        return await _waited(self._unfenced, timeout_s)

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; True once it says the
        broker may stop (it leads nothing)."""
        self._shutting_down = True
        self._wake.set()  # heartbeat now, not at the end of the interval
        return await _waited(self._should_shut_down, timeout_s)

    async def stop(self) -> None:
        # Cancelled again until it ends: a cancellation absorbed anywhere below (as 3.11's
        # asyncio.wait_for did: tests/test_async_rules.py) must not leave the heartbeat loop on.
        while self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=STOP_RECHECK_S)
        if self._task is not None and not self._task.cancelled():
            self._task.exception()  # retrieved: an error was logged where it happened

    # ---- the session --------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if self.epoch < 0:
                await self._register()
                continue
            await self._heartbeat()
            fast = self.fenced or self._shutting_down
            with contextlib.suppress(TimeoutError):
                await within(FAST_HEARTBEAT_S if fast else self.interval_s, self._wake.wait())
            self._wake.clear()

    async def _register(self) -> None:
        request = build(_registration_type(), {
            "broker_id": self.node_id, "cluster_id": self.cluster_id,
            "incarnation_id": self.incarnation_id,
            "listeners": [{"name": e.name, "host": e.host, "port": e.port,
                           "security_protocol": e.security_protocol} for e in self.listeners],
            "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                         for n, lo, hi in (METADATA_VERSION_RANGE,)],
            "rack": self.rack, "is_migrating_zk_broker": False, "log_dirs": [],
            "previous_broker_epoch": -1})
        response = await self._call(request)
        if response is None:
            return
        if response.error_code == ErrorCode.none:
            self.epoch = response.broker_epoch
            self._registered.set()
            log.info("Broker %d registered with the controller, broker epoch %d", self.node_id,
                     self.epoch)
        else:
            log.warning("Broker %d registration refused: %s", self.node_id,
                        ErrorCode(response.error_code).name)
            await asyncio.sleep(self.interval_s)

    async def _heartbeat(self) -> None:
        request = build(_heartbeat_type(), {
            "broker_id": self.node_id, "broker_epoch": self.epoch,
            "current_metadata_offset": self.metadata_offset(),
            "want_fence": not self.ready_to_unfence, "want_shut_down": self._shutting_down,
            "offline_log_dirs": []})
        response = await self._call(request)
        if response is None:
            return
        if response.error_code in (ErrorCode.stale_broker_epoch,
                                   ErrorCode.broker_id_not_registered):
            log.warning("Broker %d's registration was lost (%s); registering again",
                        self.node_id, ErrorCode(response.error_code).name)
            self.epoch = -1
            return
        if response.error_code != ErrorCode.none:
            return
        if self.fenced and not response.is_fenced:
            log.info("Broker %d is unfenced: it serves clients", self.node_id)
        self.fenced = response.is_fenced
        (self._unfenced.clear if self.fenced else self._unfenced.set)()
        if response.should_shut_down:
            self._should_shut_down.set()

    async def _call(self, request: object) -> object | None:
        try:
            response = await self.channel.call(request)  # type: ignore[arg-type]
        except ControllerUnavailable as e:
            log.info("Broker %d: %s", self.node_id, e)
            return None
        if getattr(response, "error_code", ErrorCode.none) in _RETRIABLE:
            return None
        return response


async def _waited(event: asyncio.Event, timeout_s: float) -> bool:
    """Whether `event` is set, waiting up to `timeout_s` for it."""
    with contextlib.suppress(TimeoutError):
        await within(timeout_s, event.wait())
    return event.is_set()


def _registration_type() -> type:
    from kio.schema.broker_registration.v3.request import BrokerRegistrationRequest

    return BrokerRegistrationRequest


def _heartbeat_type() -> type:
    from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest

    return BrokerHeartbeatRequest
