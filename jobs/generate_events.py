"""Job: produce a realistic clickstream to a Kafka topic with confluent-kafka (no Spark).

Events (see `jobs.events`) are JSON values keyed by user id, so one user's clicks stay in one
partition; the Kafka timestamp is when the event arrived, `event_time` inside the value is when
it happened: a little earlier (out of order) or, for a few late events, much earlier. By default
events are produced at `--rate` per second in real time; `--burst` produces them as fast as
possible with the same timestamps. The same `--seed` and `--start-time` give the same records.

    python jobs/generate_events.py --topic clicks --rate 50 --duration 60
    python jobs/generate_events.py --count 10000 --burst --seed 7 \\
        --start-time 2024-05-01T12:00:00Z --bootstrap-server localhost:9092
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python jobs/generate_events.py`: make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs import cluster
from jobs.arguments import epoch_ms, new_parser
from jobs.console import say
from jobs.events import Event, StreamSpec, iso_ms, synthesize

DEFAULT_TOPIC = "clicks"
PROGRESS_EVERY_S = 5.0
FLUSH_TIMEOUT_S = 60.0


@dataclass
class GenerateResult:
    """What was produced: records per partition and the first and last Kafka timestamps."""

    topic: str
    seed: int
    per_partition: Counter[int] = field(default_factory=Counter)
    first_ms: int | None = None
    last_ms: int | None = None

    @property
    def count(self) -> int:
        return sum(self.per_partition.values())


def parser() -> argparse.ArgumentParser:
    p = new_parser("generate_events.py", __doc__)
    p.add_argument("--topic", default=DEFAULT_TOPIC, help="topic to produce to")
    p.add_argument("--rate", type=float, default=50.0, help="events per second")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--duration", type=float, default=60.0,
                      help="seconds of events: count = rate x duration")
    size.add_argument("--count", type=int, help="number of events (instead of --duration)")
    p.add_argument("--partitions", type=int, default=3,
                   help="partitions of the topic when it has to be created")
    p.add_argument("--seed", type=int, help="random seed (default: a random one, printed)")
    p.add_argument("--start-time", type=epoch_ms, metavar="TIME",
                   help="arrival time of the first event: epoch ms or ISO 8601 (a time "
                        "without zone is local time); default: now")
    p.add_argument("--burst", action="store_true",
                   help="produce as fast as possible instead of in real time at --rate")
    p.add_argument("--users", type=int, default=200, help="distinct users (keys)")
    p.add_argument("--late-fraction", type=float, default=0.05,
                   help="share of events that arrive late")
    p.add_argument("--max-lateness", type=float, default=60.0, metavar="SECONDS",
                   help="how late a late event can be")
    cluster.add_arguments(p)
    return p


def spec_from(args: argparse.Namespace) -> StreamSpec:
    """The stream the arguments describe (a random seed is drawn when none is given)."""
    if args.rate <= 0:
        raise SystemExit("--rate must be positive")
    if not 0.0 <= args.late_fraction <= 1.0:
        raise SystemExit("--late-fraction must be between 0 and 1")
    count = args.count if args.count is not None else round(args.rate * args.duration)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    start = args.start_time if args.start_time is not None else time.time_ns() // 1_000_000
    return StreamSpec(count=max(count, 0), rate=args.rate, start_ms=start, seed=seed,
                      users=args.users, late_fraction=args.late_fraction,
                      max_lateness_s=args.max_lateness)


def produce(bootstrap: str, topic: str, events: Iterable[Event], *, rate: float | None,
            stop: threading.Event | None = None,
            on_progress: Callable[[int], None] | None = None, seed: int = 0) -> GenerateResult:
    """Produce `events` (key, JSON value, timestamp = arrival time). With `rate`, pace them in
    real time; stop early when `stop` is set. Raises if any record was refused."""
    from confluent_kafka import Producer

    result = GenerateResult(topic, seed)
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            result.per_partition[msg.partition()] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 20, "compression.type": "lz4"})
    clock = _Pacer(rate)
    last_report = time.monotonic()
    for index, event in enumerate(events):
        if stop is not None and stop.is_set():
            break
        clock.wait_for(index)
        _send(producer, topic, event, delivered)
        result.first_ms = event.arrival_ms if result.first_ms is None else result.first_ms
        result.last_ms = event.arrival_ms
        if on_progress is not None and time.monotonic() - last_report >= PROGRESS_EVERY_S:
            last_report = time.monotonic()
            on_progress(index + 1)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if errors or remaining:
        raise RuntimeError(f"{len(errors) + remaining} record(s) not delivered to {topic}: "
                           f"{errors[:1] or ['flush timed out']}")
    return result


def _send(producer: Any, topic: str, event: Event, delivered: Callable[..., None]) -> None:
    while True:
        try:
            producer.produce(topic, event.value(), key=event.key(),
                             timestamp=event.arrival_ms, on_delivery=delivered)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)


class _Pacer:
    """Real-time pacing: event i goes out `i / rate` seconds after the first one."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.started = time.monotonic()

    def wait_for(self, index: int) -> None:
        if not self.rate:
            return
        delay = self.started + index / self.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def run(args: argparse.Namespace) -> GenerateResult:
    bootstrap = cluster.resolve(args)
    spec = spec_from(args)
    partitions = cluster.ensure_topic(bootstrap, args.topic, args.partitions)
    pace = "as fast as possible" if args.burst else f"at {spec.rate:g}/s"
    say(f"producing {spec.count} events to {args.topic} ({partitions} partitions) {pace}, "
        f"seed {spec.seed}, first at {iso_ms(spec.start_ms)}")
    result = produce(bootstrap, args.topic, synthesize(spec),
                     rate=None if args.burst else spec.rate, seed=spec.seed,
                     on_progress=lambda n: say(f"produced {n}/{spec.count} events"))
    by_partition = ", ".join(f"{p}: {n}" for p, n in sorted(result.per_partition.items()))
    say(f"produced {result.count} events to {args.topic} (by partition {by_partition or '-'})")
    return result


def main(argv: list[str] | None = None) -> int:
    run(parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
