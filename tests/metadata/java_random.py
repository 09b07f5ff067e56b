"""Kafka's MockRandom (a fixed linear congruential generator under java.util.Random's nextInt),
so placement tests can replay the exact assignments Kafka's own tests expect."""

from __future__ import annotations

_MASK = (1 << 64) - 1


class MockRandom:
    def __init__(self, state: int = 17) -> None:
        self.state = state

    def _next(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & _MASK
        return self.state >> (64 - bits)

    def next_int(self, bound: int) -> int:
        """java.util.Random.nextInt(bound)."""
        value = self._next(31)
        if bound & (bound - 1) == 0:
            return (bound * value) >> 31
        while True:
            result = value % bound
            if value - result + bound - 1 < 2**31:  # no int overflow: accept
                return result
            value = self._next(31)
