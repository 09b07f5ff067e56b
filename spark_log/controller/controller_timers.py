"""The active controller's periodic work (Kafka's QuorumController scheduled events), each on an
event-loop timer whose deadline comes from the decisions, never a polling loop: fencing the
brokers whose sessions expired (at the next expiry `BrokerHeartbeats` gives, computed again
whenever a request may have changed the sessions), the preferred-leader rebalance every
`leader_imbalance_check_interval_ms` when `auto.leader.rebalance.enable`, and the unclean
election of leaderless partitions every `unclean_election_check_interval_ms`. A run that hit
its limit of elections runs again at once.

A session expiry timer that fires more than `STALL_MS` late means this process's event loop was
held (a broker sharing it applied a metadata change touching thousands of partitions): the
heartbeats queued behind that work were not heard, so nobody is fenced then; every session gets
half a session from now instead. Otherwise a node hosting many partitions fences itself, which
moves every leadership, which holds the loop again.

Deadlines are read on the controller's injected clock; the timers wait on the event loop's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from spark_log.metadata import MetadataImage

from .broker_heartbeats import BrokerHeartbeats
from .cluster_control import fence_stale_broker
from .controller_config import ControllerTimings
from .controller_result import ControllerResult
from .controller_settings import ControllerSettings
from .leader_election import balance_partition_leaders, elect_unclean_leaders

__all__ = ["ControllerTimers"]

log = logging.getLogger(__name__)

Write = Callable[[ControllerResult[Any]], "int | None"]

_EXPIRY, _REBALANCE, _UNCLEAN = "session expiry", "leader rebalance", "unclean election"
STALL_MS = 1000  # how late the expiry timer may fire before it counts as a stalled loop


class ControllerTimers:
    """Invariants: timers are set only between `start` and `stop`; at most one of each kind;
    each run decides from the working image at that moment and writes through `write`, which
    returns None once this node cannot write (then `stop` has been called)."""

    def __init__(self, timings: ControllerTimings, settings: ControllerSettings,
                 heartbeats: BrokerHeartbeats, *, clock_ms: Callable[[], int],
                 image: Callable[[], MetadataImage], write: Write) -> None:
        self._timings, self._settings, self._heartbeats = timings, settings, heartbeats
        self._clock_ms, self._image, self._write = clock_ms, image, write
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._running = False
        self._expiry_due = 0  # when the expiry timer should fire, on the controller's clock

    def start(self) -> None:
        """The controller became active."""
        self._running = True
        self.sessions_changed()
        if self._settings.auto_leader_rebalance_enable:
            self._set(_REBALANCE, self._timings.leader_imbalance_check_interval_ms,
                      self._rebalance)
        self._set(_UNCLEAN, self._timings.unclean_election_check_interval_ms,
                  self._elect_unclean)

    def stop(self) -> None:
        self._running = False
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def sessions_changed(self) -> None:
        """A broker registered, heartbeated or left: the next expiry may have moved."""
        if not self._running:
            return
        expiry = self._heartbeats.next_expiry_ms(self._image())
        if expiry is None:
            self._cancel(_EXPIRY)
        else:
            now = self._clock_ms()
            self._expiry_due = max(expiry, now)
            self._set(_EXPIRY, expiry - now, self._fence_stale_brokers)

    def _set(self, kind: str, delay_ms: int, run: Callable[[], None]) -> None:
        self._cancel(kind)
        loop = asyncio.get_running_loop()
        self._handles[kind] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, kind, run)

    def _cancel(self, kind: str) -> None:
        handle = self._handles.pop(kind, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, kind: str, run: Callable[[], None]) -> None:
        self._handles.pop(kind, None)
        if not self._running:
            return
        try:
            run()
        except Exception:
            log.exception("The controller's %s failed", kind)

    def _fence_stale_brokers(self) -> None:
        """Fence every broker whose session expired, one per batch as Kafka does (each
        decision sees the fencing before it)."""
        now = self._clock_ms()
        if now - self._expiry_due > STALL_MS:
            log.info("The session expiry check ran %d ms late: sessions extended",
                     now - self._expiry_due)
            self._heartbeats.extend_sessions(now)
            self.sessions_changed()
            return
        for _ in range(len(self._image().brokers)):
            result = fence_stale_broker(self._image(), self._heartbeats,
                                        settings=self._settings, now_ms=self._clock_ms())
            if result.response is None or not result.records:
                break
            log.info("Fencing broker %d: its session expired", result.response)
            if self._write(result) is None:
                return
        self.sessions_changed()

    def _rebalance(self) -> None:
        result = balance_partition_leaders(self._image(), settings=self._settings)
        self._run_elections(result, _REBALANCE, self._timings.leader_imbalance_check_interval_ms,
                            self._rebalance)

    def _elect_unclean(self) -> None:
        result = elect_unclean_leaders(self._image(), settings=self._settings)
        self._run_elections(result, _UNCLEAN, self._timings.unclean_election_check_interval_ms,
                            self._elect_unclean)

    def _run_elections(self, result: ControllerResult[bool], kind: str, interval_ms: int,
                       run: Callable[[], None]) -> None:
        if result.records:
            log.info("The controller's %s changes %d partitions", kind, len(result.records))
            if self._write(result) is None:
                return
        self._set(kind, 0 if result.response else interval_ms, run)
