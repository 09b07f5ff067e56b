"""The requests a replica has in flight (Kafka's RequestManager): one per destination and kind,
each with a correlation id and a deadline, so a response is matched to the request it answers
(late, duplicated and reordered ones are dropped) and a lost request is sent again."""

from __future__ import annotations

from dataclasses import dataclass

from .messages import Message, Request

BACKOFF = -1  # the correlation id of a wait before retrying, not of a request


@dataclass
class _Pending:
    correlation_id: int
    kind: type
    deadline: int


class RequestManager:
    """Invariants: at most one entry per (destination, request kind); correlation ids are never
    reused, and all are above `ids_after`. Not thread-safe."""

    def __init__(self, timeout_ms: int, ids_after: int = 0) -> None:
        self.timeout_ms = timeout_ms
        self._next = ids_after
        self._pending: dict[tuple[int, type], _Pending] = {}

    def sent(self, destination: int, body: Request, now: int, extra_ms: int = 0) -> int:
        self._next += 1
        self._pending[(destination, type(body))] = _Pending(self._next, type(body),
                                                            now + self.timeout_ms + extra_ms)
        return self._next

    def backoff(self, destination: int, kind: type, until: int) -> None:
        """Hold off the next request of `kind` to `destination` until `until`."""
        self._pending[(destination, kind)] = _Pending(BACKOFF, kind, until)

    def pending(self, destination: int, *kinds: type) -> bool:
        return any((destination, kind) in self._pending for kind in kinds)

    def pending_any(self, kind: type) -> bool:
        return any(k == kind for _, k in self._pending)

    def complete(self, response: Message) -> bool:
        """Whether `response` answers a request still in flight (which it then completes)."""
        for key, pending in self._pending.items():
            if key[0] == response.source and pending.correlation_id == response.correlation_id:
                del self._pending[key]
                return True
        return False

    def expire(self, now: int) -> None:
        """Forget requests (and backoffs) past their deadline, so they can be sent again."""
        for key in [k for k, p in self._pending.items() if now >= p.deadline]:
            del self._pending[key]

    def next_deadline(self) -> int | None:
        return min((p.deadline for p in self._pending.values()), default=None)

    def clear(self) -> None:
        """A new epoch state: nothing sent before it is waited for."""
        self._pending.clear()
