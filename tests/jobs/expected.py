"""What the window statistics must be, computed in plain Python from the generator's events
(the same `StreamSpec` the job's input was produced from)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from jobs.events import EVENT_TYPES, Event, iso_ms


@dataclass
class WindowStats:
    events: int = 0
    per_type: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_TYPES, 0))
    users: set[str] = field(default_factory=set)
    revenue: Decimal = Decimal("0.00")

    def add(self, event: Event) -> None:
        self.events += 1
        self.per_type[event.event_type] += 1
        self.users.add(event.user_id)
        self.revenue += event.amount or Decimal(0)

    def exact(self) -> dict[str, object]:
        """The exactly comparable numbers (not `users`, an approximate distinct count)."""
        return {"events": self.events, **self.per_type, "revenue": self.revenue}


def windows(events: Iterable[Event], window_ms: int) -> dict[str, WindowStats]:
    """Window start (the results' key, `2024-05-01T12:00:00Z`) -> statistics."""
    stats: dict[str, WindowStats] = {}
    for event in events:
        start = event.event_time_ms - event.event_time_ms % window_ms
        stats.setdefault(window_key(start), WindowStats()).add(event)
    return dict(sorted(stats.items()))


def window_key(start_ms: int) -> str:
    return iso_ms(start_ms).replace(".000Z", "Z")


def result_numbers(value: bytes) -> dict[str, object]:
    """A results record's value -> the numbers `WindowStats.exact` gives."""
    row = json.loads(value, parse_float=Decimal)
    return {"events": row["events"], **{t: row[t] for t in EVENT_TYPES},
            "revenue": Decimal(row["revenue"]).quantize(Decimal("0.01"))}
