"""The history checker: a record of every send, acknowledgement and read during a run, and the
verdict on it — lost, duplicated, reordered and phantom records, and acknowledgements that name
the wrong offset. Plus the drivers that fill one in against a real cluster: a continuous
idempotent acks=all producer, a tailing consumer, and the final complete read.

`History` itself knows nothing of brokers: values are anything hashable (the drivers use the
integer encoded at the head of each record's value, see `encode_value`), positions are
(partition, offset). The rules it checks, for one idempotent producer (max.in.flight <= 5):

* every acknowledged value is in the final read of its partition, exactly once, at the offset
  its acknowledgement named;
* a value whose delivery failed (or never reported) may be absent, but never there twice;
* the final offsets of a producer's values in a partition follow send order — idempotence makes
  the broker refuse out-of-sequence batches, so what was written was written in send order,
  whether or not it was acknowledged;
* everything in the final read was sent, to that partition;
* everything any consumer read during the run is still in the final read, at the same offset:
  a consumer only sees committed records, and committed records never vanish.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

Value = Hashable
Position = tuple[int, int]  # (partition, offset)

EXAMPLES = 5  # findings of each kind that str(report) shows
VALUE_DIGITS = 12  # the width of the number at the head of a driver's record value


@dataclass(frozen=True)
class Lost:
    """An acknowledged value absent from the final read of its partition."""
    value: Value
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.value!r} acked at {self.partition}/{self.offset}, not in the final read"


@dataclass(frozen=True)
class Duplicated:
    """A value at more than one position in the final read."""
    value: Value
    positions: tuple[Position, ...]

    def __str__(self) -> str:
        where = ", ".join(f"{p}/{o}" for p, o in self.positions)
        return f"{self.value!r} at {where}"


@dataclass(frozen=True)
class Reordered:
    """`later` was sent after `earlier` by the same producer to the same partition, but sits at
    a lower final offset."""
    partition: int
    earlier: Value
    earlier_offset: int
    later: Value
    later_offset: int

    def __str__(self) -> str:
        return (f"partition {self.partition}: {self.later!r} (sent later) at offset "
                f"{self.later_offset}, before {self.earlier!r} at {self.earlier_offset}")


@dataclass(frozen=True)
class Phantom:
    """A record in the final read that was never sent there, or one a consumer read that the
    final read does not hold at that position; `found` is what the final read holds there."""
    partition: int
    offset: int
    value: Value
    why: str
    found: Value = None

    def __str__(self) -> str:
        return f"{self.value!r} at {self.partition}/{self.offset}: {self.why}"


@dataclass(frozen=True)
class Conflict:
    """An acknowledgement at odds with the final read or with another outcome of the value."""
    value: Value
    partition: int
    offset: int
    why: str

    def __str__(self) -> str:
        return f"{self.value!r} acked at {self.partition}/{self.offset}: {self.why}"


@dataclass
class Report:
    """The findings of `History.check()`; every list is empty for a correct run."""
    lost: list[Lost] = field(default_factory=list)
    duplicated: list[Duplicated] = field(default_factory=list)
    reordered: list[Reordered] = field(default_factory=list)
    phantom: list[Phantom] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.phantom
                    or self.conflicts)

    def __str__(self) -> str:
        head = ", ".join(f"{n} {what}" for what, n in self.counts.items())
        lines = [f"history: {head}: " + ("no anomalies" if self.ok else "ANOMALIES")]
        for name in ("lost", "duplicated", "reordered", "phantom", "conflicts"):
            found = getattr(self, name)
            if found:
                lines.append(f"  {name}: {len(found)}")
                lines += [f"    {finding}" for finding in found[:EXAMPLES]]
                if len(found) > EXAMPLES:
                    lines.append(f"    ... and {len(found) - EXAMPLES} more")
        return "\n".join(lines)


class History:
    """Everything one run sent, had acknowledged, read and finally found; thread-safe.

    Invariants: each value is sent once (a second `sent` of it raises — values must be unique);
    a position has at most one value in the final read (a second, different one raises); reads
    are kept as the set of values seen at each position, so consumers may re-read freely."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._send_order: dict[Value, int] = {}
        self._sent_to: dict[Value, tuple[str, int | None]] = {}  # value -> (producer, partition)
        self._acks: dict[Value, list[Position]] = defaultdict(list)
        self._failures: dict[Value, list[str]] = defaultdict(list)
        self._reads: dict[Position, set[Value]] = defaultdict(set)
        self._final: dict[Position, Value] = {}

    def sent(self, value: Value, partition: int | None = None, producer: str = "") -> None:
        """Before each produce call. `partition` None: the partitioner chooses (the ack or the
        final read tells where it went). Order is compared among one `producer`'s sends."""
        with self._lock:
            if value in self._send_order:
                raise ValueError(f"{value!r} sent twice: values must be unique")
            self._send_order[value] = len(self._send_order)
            self._sent_to[value] = (producer, partition)

    def acked(self, value: Value, partition: int, offset: int) -> None:
        with self._lock:
            self._acks[value].append((partition, offset))

    def failed(self, value: Value, error: str) -> None:
        with self._lock:
            self._failures[value].append(error)

    def read(self, partition: int, offset: int, value: Value) -> None:
        """A record some consumer saw during the run."""
        with self._lock:
            self._reads[(partition, offset)].add(value)

    def final(self, partition: int, offset: int, value: Value) -> None:
        """A record of the complete read of every partition after the run."""
        with self._lock:
            if self._final.setdefault((partition, offset), value) != value:
                raise ValueError(f"final read gave two values at {partition}/{offset}")

    def check(self) -> Report:
        with self._lock:
            final_at: dict[Value, list[Position]] = defaultdict(list)
            for position, value in sorted(self._final.items()):
                final_at[value].append(position)
            report = Report(counts={
                "sent": len(self._send_order), "acked": len(self._acks),
                "failed": len(self._failures),
                "without outcome": sum(1 for v in self._send_order
                                       if v not in self._acks and v not in self._failures),
                "positions read": len(self._reads), "final": len(self._final)})
            self._check_acks(final_at, report)
            report.duplicated = [Duplicated(v, tuple(at)) for v, at in final_at.items()
                                 if len(at) > 1]
            self._check_order(final_at, report)
            self._check_final(report)
            self._check_reads(report)
            return report

    def _check_acks(self, final_at: dict[Value, list[Position]], report: Report) -> None:
        for value, acks in self._acks.items():
            partition, offset = acks[0]
            if value not in self._send_order:
                report.conflicts.append(Conflict(value, partition, offset, "never sent"))
            if len(set(acks)) > 1 or value in self._failures:
                report.conflicts.append(Conflict(
                    value, partition, offset,
                    f"also acked at {acks[1:]}" if len(set(acks)) > 1
                    else f"also failed: {self._failures[value][0]}"))
            found = self._final.get((partition, offset))
            in_partition = [pos for pos in final_at.get(value, ()) if pos[0] == partition]
            if not in_partition:
                report.lost.append(Lost(value, partition, offset))
            elif found != value:
                where = ", ".join(f"{p}/{o}" for p, o in in_partition)
                holds = "nothing" if found is None else repr(found)
                report.conflicts.append(Conflict(
                    value, partition, offset, f"the final read holds {holds} there and "
                                              f"the value at {where}"))

    def _check_order(self, final_at: dict[Value, list[Position]], report: Report) -> None:
        # Each value's first final position, grouped by (producer, partition), in send order;
        # one finding per value that lands below the highest offset of any value sent before it.
        streams: dict[tuple[str, int], list[tuple[int, Value, int]]] = defaultdict(list)
        for value, positions in final_at.items():
            if value not in self._send_order:
                continue
            partition, offset = positions[0]
            producer = self._sent_to[value][0]
            streams[(producer, partition)].append((self._send_order[value], value, offset))
        for (_, partition), stream in sorted(streams.items()):
            highest: tuple[Value, int] | None = None
            for _, value, offset in sorted(stream, key=lambda s: s[0]):
                if highest is not None and offset < highest[1]:
                    report.reordered.append(Reordered(partition, highest[0], highest[1],
                                                      value, offset))
                else:
                    highest = (value, offset)

    def _check_final(self, report: Report) -> None:
        for (partition, offset), value in sorted(self._final.items()):
            if value not in self._send_order:
                report.phantom.append(Phantom(partition, offset, value, "never sent"))
                continue
            to = self._sent_to[value][1]
            if to is not None and to != partition:
                report.phantom.append(Phantom(partition, offset, value,
                                              f"sent to partition {to}"))

    def _check_reads(self, report: Report) -> None:
        for (partition, offset), values in sorted(self._reads.items()):
            found = self._final.get((partition, offset))
            for value in values:
                if value == found:
                    continue
                why = ("read, then absent from the final read" if found is None
                       else f"read, then the final read holds {found!r} there")
                report.phantom.append(Phantom(partition, offset, value, why, found))


def encode_value(number: int, size: int = 100) -> bytes:
    """`number` in VALUE_DIGITS ASCII digits, padded to `size` bytes."""
    head = b"%0*d" % (VALUE_DIGITS, number)
    return head + b"." * max(0, size - len(head))


def decode_value(raw: bytes | None) -> Value:
    """The number `encode_value` put at the head; anything else is returned as it is, so that
    a record no driver wrote shows as a phantom rather than an error."""
    head = (raw or b"")[:VALUE_DIGITS]
    return int(head) if len(head) == VALUE_DIGITS and head.isdigit() else raw


class Progress:
    """The highest value a driver has seen so far, and when each watched threshold was first
    reached — to await "the first record produced after the kill is acknowledged" without
    polling. Invariant: `highest` only grows; a watched threshold's time is set once."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.highest = -1
        self._reached: dict[int, float | None] = {}

    def watch(self, threshold: int) -> None:
        """Start timing `threshold` (before the event that should lead to it)."""
        with self._changed:
            self._reached[threshold] = time.monotonic() if self.highest >= threshold else None

    def advance(self, value: int) -> None:
        with self._changed:
            if value <= self.highest:
                return
            self.highest = value
            now = time.monotonic()
            for threshold, at in self._reached.items():
                if at is None and threshold <= value:
                    self._reached[threshold] = now
            self._changed.notify_all()

    def reached(self, threshold: int, timeout_s: float) -> float | None:
        """The monotonic time `threshold` was first reached after `watch(threshold)`, waiting up
        to `timeout_s`; None if it was not."""
        with self._changed:
            self._changed.wait_for(lambda: self._reached.get(threshold) is not None, timeout_s)
            return self._reached.get(threshold)


class ContinuousProducer(threading.Thread):
    """A confluent-kafka idempotent acks=all producer writing `encode_value(first_value)`,
    `(first_value + 1)`, ... to `topic` until `stop()`, partition `n % partitions` for value n,
    recording every send (as producer `name`) and delivery outcome into `history`. `rate`
    records/s paces it (None: as fast as the client queue takes them; `history` keeps a few
    hundred bytes a record, so pace long runs). `acks` advances with every acknowledged value,
    in order per partition. Producers sharing a history need disjoint value ranges.

    Invariant: `next_value` is the value the next produce call will use, so every value below
    it has been recorded as sent."""

    def __init__(self, bootstrap: str, topic: str, history: History, partitions: int = 1,
                 rate: float | None = 1000.0, value_size: int = 100,
                 config: dict[str, Any] | None = None, flush_timeout_s: float = 60.0,
                 first_value: int = 0, name: str = "") -> None:
        super().__init__(name=name or f"producer-{topic}", daemon=True)
        self.topic, self.history, self.partitions = topic, history, partitions
        self.rate, self.value_size, self.flush_timeout_s = rate, value_size, flush_timeout_s
        self.config = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                       "acks": "all", "linger.ms": 5, **(config or {})}
        self.acks = Progress()
        self.first_value = self.next_value = first_value
        self.unflushed = 0  # still undelivered when the flush after stop() gave up
        self.fatal: list[str] = []  # fatal client errors (an idempotent producer stops on one)
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # handed to stop()'s caller
            self.error = exc

    def _produce(self) -> None:
        producer = Producer({**self.config, "error_cb": self._on_error})
        start = time.monotonic()
        while not self._stopping.is_set() and not self.fatal:
            if self.rate is not None:
                # Paced against the start, so a stall is followed by a catch-up burst, as an
                # application with a steady inflow would send.
                wait = start + (self.next_value - self.first_value) / self.rate - time.monotonic()
                if wait > 0.001 and self._stopping.wait(wait):
                    break
            self._send(producer, self.next_value)
            self.next_value += 1
            producer.poll(0)
        self.unflushed = producer.flush(self.flush_timeout_s)

    def _send(self, producer: Producer, number: int) -> None:
        partition = number % self.partitions
        self.history.sent(number, partition, producer=self.name)
        value = encode_value(number, self.value_size)
        while True:
            try:
                producer.produce(self.topic, value, partition=partition,
                                 on_delivery=self._on_delivery)
                return
            except BufferError:  # the client's queue is full: let deliveries drain it
                producer.poll(0.05)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        value = decode_value(msg.value())
        if err is not None:
            self.history.failed(value, str(err))
            return
        self.history.acked(value, msg.partition(), msg.offset())
        if isinstance(value, int):
            self.acks.advance(value)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop producing, wait for the flush (bounded by `flush_timeout_s`), re-raise a
        failure of the thread."""
        self._stopping.set()
        self.join(timeout_s if timeout_s is not None else self.flush_timeout_s + 30)
        if self.is_alive():
            raise TimeoutError(f"{self.name} did not stop")
        if self.error is not None:
            raise self.error


def partitions_of(bootstrap: str, topic: str, timeout_s: float = 10.0) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=timeout_s)
    described = metadata.topics[topic]
    if described.error is not None:
        raise RuntimeError(f"{topic}: {described.error}")
    return sorted(described.partitions)


def _consumer(bootstrap: str, **config: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"history-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "enable.partition.eof": False, **config})


class TailingConsumer(threading.Thread):
    """A consumer assigned every partition of `topic` from the beginning, recording each record
    it receives into `history` until `stop()`. `reads` advances with every value received."""

    def __init__(self, bootstrap: str, topic: str, history: History,
                 config: dict[str, Any] | None = None) -> None:
        super().__init__(name=f"consumer-{topic}", daemon=True)
        self.bootstrap, self.topic, self.history = bootstrap, topic, history
        self.config = {"fetch.wait.max.ms": 10, **(config or {})}
        self.reads = Progress()
        self.received = 0
        self.errors: list[str] = []  # consumer errors seen (transient ones are expected)
        self.error: BaseException | None = None
        self._stopping = threading.Event()
        self._assigned = threading.Event()

    def run(self) -> None:
        try:
            consumer = _consumer(self.bootstrap, **self.config)
            try:
                consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                                 for p in partitions_of(self.bootstrap, self.topic)])
                self._assigned.set()
                while not self._stopping.is_set():
                    self._take(consumer.consume(500, 0.1))
            finally:
                consumer.close()
        except BaseException as exc:  # handed to stop()'s caller
            self.error = exc
            self._assigned.set()

    def _take(self, messages: list[Message]) -> None:
        for msg in messages:
            if msg.error() is not None:
                self.errors.append(str(msg.error()))
                continue
            value = decode_value(msg.value())
            self.history.read(msg.partition(), msg.offset(), value)
            self.received += 1
            if isinstance(value, int):
                self.reads.advance(value)

    def start_assigned(self, timeout_s: float = 30.0) -> TailingConsumer:
        """Start, and return once the partitions are assigned."""
        self.start()
        if not self._assigned.wait(timeout_s):
            raise TimeoutError(f"{self.name} not assigned after {timeout_s} s")
        if self.error is not None:
            raise self.error
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping.set()
        self.join(timeout_s)
        if self.is_alive():
            raise TimeoutError(f"{self.name} did not stop")
        if self.error is not None:
            raise self.error


@contextmanager
def continuous_run(bootstrap: str, topic: str, history: History, partitions: int = 1,
                   rate: float | None = 1000.0, **producer_options: Any
                   ) -> Iterator[tuple[ContinuousProducer, TailingConsumer]]:
    """A tailing consumer (assigned first, so it misses nothing) and a continuous producer on
    `topic`, both recording into `history`; both stopped on leaving, the producer flushed."""
    consumer = TailingConsumer(bootstrap, topic, history).start_assigned()
    try:
        producer = ContinuousProducer(bootstrap, topic, history, partitions, rate,
                                      **producer_options)
        producer.start()
        try:
            yield producer, consumer
        finally:
            producer.stop()
    finally:
        consumer.stop()


def acked_and_read(producer: ContinuousProducer, consumer: TailingConsumer, value: int,
                   timeout_s: float) -> bool:
    """Whether `value` (or a later one) is acknowledged and read within `timeout_s` each."""
    producer.acks.watch(value)
    consumer.reads.watch(value)
    return (producer.acks.reached(value, timeout_s) is not None
            and consumer.reads.reached(value, timeout_s) is not None)


Records = dict[int, list[tuple[int, bytes | None]]]  # partition -> [(offset, value)]


def read_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> Records:
    """Every record of every partition of `topic`, from the beginning up to the high watermark
    each partition has when the read starts. Raises TimeoutError if that is not reached within
    `timeout_s` — a partial final read would show acknowledged records as lost."""
    deadline = time.monotonic() + timeout_s
    partitions = partitions_of(bootstrap, topic)
    consumer = _consumer(bootstrap, **{"fetch.wait.max.ms": 10})
    try:
        ends = {p: _high_watermark(consumer, topic, p, deadline) for p in partitions}
        records: Records = {p: [] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in partitions if ends[p] > 0])
        open_ = {p for p in partitions if ends[p] > 0}
        positions = dict.fromkeys(partitions, -1)
        while open_:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic}: read up to {positions}, not to {ends}")
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is not None:
                    continue  # transient (a leader moving): the consumer retries
                p = msg.partition()
                if p in open_ and msg.offset() < ends[p]:
                    records[p].append((msg.offset(), msg.value()))
                    positions[p] = msg.offset()
                # Done at the last offset below the watermark: these runs write no
                # transactions, so that offset holds a record (not a control marker).
                if msg.offset() >= ends[p] - 1:
                    open_.discard(p)
        return records
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, topic: str, partition: int, deadline: float) -> int:
    while True:
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                     timeout=2.0, cached=False)
            return int(high)
        except Exception:  # KafkaException while a leader is elected: ask again
            if time.monotonic() >= deadline:
                raise


def record_final(history: History, records: Records) -> None:
    for partition, read in records.items():
        for offset, raw in read:
            history.final(partition, offset, decode_value(raw))


def final_read(history: History, bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    """`read_all` into `history.final`."""
    record_final(history, read_all(bootstrap, topic, timeout_s))

