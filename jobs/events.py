"""The sample clickstream: what one event is (its JSON value, Kafka key and timestamp), the Spark
schema that parses it, and a deterministic synthesis of a stream with out-of-order and late
events.

Time model: event i *arrives* (is produced; its Kafka timestamp) at `start + i / rate`. Its
`event_time` (in the JSON value) is earlier by a network delay of 0-2 s, so neighbours swap
order, and for a `late_fraction` of events by 5 s up to `max_lateness_s` (a phone that was
offline). Kafka timestamps never decrease within the stream; event times do. The same spec
(seed included) always yields the same events.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

EVENT_TYPES = ("page_view", "search", "add_to_cart", "purchase")
_TYPE_WEIGHTS = (0.62, 0.18, 0.13, 0.07)
_PRODUCTS = 120
_SEARCHES = ("shoes", "jacket", "headphones", "coffee", "backpack", "lamp", "desk", "socks")
_NEW_SESSION_P = 0.04
_NETWORK_DELAY_S = 2.0
_MIN_LATENESS_S = 5.0

# What stream_etl parses values with (from_json). `amount` is a decimal: sums stay exact.
SPARK_SCHEMA = ("event_id STRING, user_id STRING, session_id STRING, event_type STRING, "
                "page STRING, product_id STRING, amount DECIMAL(10,2), event_time TIMESTAMP")


@dataclass(frozen=True)
class Event:
    """One click. `amount` is set for purchases only; times are epoch milliseconds."""

    event_id: str
    user_id: str
    session_id: str
    event_type: str
    page: str
    product_id: str | None
    amount: Decimal | None
    event_time_ms: int
    arrival_ms: int

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps({
            "event_id": self.event_id, "user_id": self.user_id, "session_id": self.session_id,
            "event_type": self.event_type, "page": self.page, "product_id": self.product_id,
            "amount": None if self.amount is None else float(self.amount),
            "event_time": iso_ms(self.event_time_ms),
        }, separators=(",", ":")).encode()


@dataclass(frozen=True)
class StreamSpec:
    """What to synthesize. Invariants: count >= 0, rate > 0, 0 <= late_fraction <= 1."""

    count: int
    rate: float
    start_ms: int
    seed: int
    users: int = 200
    late_fraction: float = 0.05
    max_lateness_s: float = 60.0

    def arrival_ms(self, index: int) -> int:
        return self.start_ms + int(index * 1000 / self.rate)


def iso_ms(epoch_ms: int) -> str:
    """`2024-05-01T12:00:00.123Z`: ISO 8601, UTC, milliseconds."""
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def synthesize(spec: StreamSpec) -> Iterator[Event]:
    """The spec's events in arrival order."""
    rng = random.Random(spec.seed)
    sessions: dict[str, int] = {}
    for index in range(spec.count):
        arrival = spec.arrival_ms(index)
        user = f"u{rng.randrange(spec.users):04d}"
        if user not in sessions or rng.random() < _NEW_SESSION_P:
            sessions[user] = rng.getrandbits(32)
        event_type = rng.choices(EVENT_TYPES, _TYPE_WEIGHTS)[0]
        page, product, amount = _what(rng, event_type)
        yield Event(event_id=f"{rng.getrandbits(64):016x}", user_id=user,
                    session_id=f"{user}-{sessions[user]:08x}", event_type=event_type,
                    page=page, product_id=product, amount=amount,
                    event_time_ms=arrival - _delay_ms(rng, spec), arrival_ms=arrival)


def _what(rng: random.Random, event_type: str) -> tuple[str, str | None, Decimal | None]:
    """(page, product id, amount) of an event of `event_type`."""
    product = f"p{rng.randrange(_PRODUCTS):03d}"
    if event_type == "search":
        return f"/search?q={rng.choice(_SEARCHES)}", None, None
    if event_type == "page_view":
        return f"/products/{product}", product, None
    if event_type == "add_to_cart":
        return "/cart", product, None
    return "/checkout/complete", product, Decimal(rng.randrange(500, 25_000)) / 100


def _delay_ms(rng: random.Random, spec: StreamSpec) -> int:
    """How long before its arrival the event happened."""
    delay = rng.uniform(0.0, _NETWORK_DELAY_S)
    if rng.random() < spec.late_fraction:
        delay = rng.uniform(min(_MIN_LATENESS_S, spec.max_lateness_s), spec.max_lateness_s)
    return int(delay * 1000)
