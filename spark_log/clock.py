"""Injectable time: every component that reads the clock takes a `Clock`, so tests can move time.

`SystemClock` is the real one; `ManualClock` is advanced by hand in tests of retention, segment
rolling, session timeouts and transaction timeouts.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary start that never go back (timeouts, flush intervals)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to. Thread-safe."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._mono = 0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def monotonic_ms(self) -> int:
        with self._lock:
            return self._mono

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms
            self._mono += ms


SYSTEM_CLOCK = SystemClock()
