"""Executor side of a read: one offset range of one partition -> Arrow record batches.

`RangePartition` is what the driver ships to a task: the range, the resolved cluster address,
the client settings and how to react to data loss. `read_range` first takes the direct path
(`direct_read`): raw Fetch requests to the partition leader decoded a whole response at a time
by `columnar` (several times faster than per-message objects). Whenever that path
meets anything but plain data (an error code, aborted transactions, TLS/SASL settings, a
corrupt batch) it hands over, at the offset reached, to a confluent-kafka consumer, which
consumes up to (not including) the range end in large chunks, asking for no more messages
than remain so librdkafka never waits for records past the end. Offsets missing inside
the range (transaction markers, compaction) are normal; offsets deleted under the range (the log
start moved past them, or the topic is gone) are data loss: an error with failOnDataLoss=true, a
warning and a skip otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql.datasource import InputPartition

from .errors import PylogDataLossError

log = logging.getLogger(__name__)

CHUNK = 20_000
POLL_S = 0.5


@dataclass
class RangePartition(InputPartition):
    """One task's work. Invariant: 0 <= start <= end; `bootstrap` is a resolved address."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap: str
    kafka_conf: Mapping[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    direct_fetch: bool = True

    def __post_init__(self) -> None:
        super().__init__((self.topic, self.partition, self.start, self.end))


def data_loss(message: str, fail: bool) -> None:
    """Raise (failOnDataLoss=true) or log (false) a data loss, with the option to flip."""
    if fail:
        raise PylogDataLossError(
            f"{message} Some data may have been lost: it was deleted by retention or "
            "DeleteRecords, or the topic was deleted, before the query read it. Set the source "
            "option 'failOnDataLoss' to 'false' to skip lost data with a warning instead.")
    log.warning("%s Continuing without the lost data (failOnDataLoss=false).", message)


class _Lost(Exception):
    """The rest of the range cannot be read (data loss, tolerated)."""


def read_range(p: RangePartition, builder: Any) -> Iterator[Any]:
    """Yield record batches for offsets [p.start, p.end) of p's partition."""
    if p.end <= p.start:
        return
    if p.direct_fetch and _plaintext(p.kafka_conf):
        from .direct_read import read_direct

        reached = [p.start]
        yield from read_direct(p, builder, reached)
        if reached[0] >= p.end:
            return
        p = replace(p, start=reached[0])
    yield from _read_with_consumer(p, builder)


def _plaintext(conf: Mapping[str, str]) -> bool:
    protocol = str(conf.get("security.protocol", "plaintext")).lower()
    return protocol == "plaintext" and not any(k.startswith(("sasl.", "ssl."))
                                                for k in conf)


def _read_with_consumer(p: RangePartition, builder: Any) -> Iterator[Any]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    from .client import consumer_conf

    consumer = Consumer(consumer_conf(p.bootstrap, p.kafka_conf))
    try:
        tp = KTP(p.topic, p.partition, p.start)
        consumer.assign([tp])
        yield from _consume(consumer, tp, p, builder)
    except _Lost:
        return
    finally:
        consumer.close()


def _consume(consumer: Any, tp: Any, p: RangePartition, builder: Any) -> Iterator[Any]:
    next_offset = p.start
    idle_since = time.monotonic()
    while next_offset < p.end:
        msgs = consumer.consume(num_messages=min(CHUNK, p.end - next_offset), timeout=POLL_S)
        msgs = _check_errors(msgs, p)
        if not msgs:
            next_offset = _idle(consumer, tp, p, next_offset, idle_since)
            continue
        idle_since = time.monotonic()
        first = msgs[0].offset()
        if first != next_offset:
            _gap(consumer, tp, p, next_offset, first)
        keep = _count_below(msgs, p.end)
        if keep:
            yield builder.build(p.topic, p.partition, msgs if keep == len(msgs) else msgs[:keep])
        next_offset = msgs[-1].offset() + 1


def _check_errors(msgs: list[Any], p: RangePartition) -> list[Any]:
    from confluent_kafka import KafkaError, KafkaException, Message

    if not any(map(Message.error, msgs)):
        return msgs
    bad = [m for m in msgs if m.error() is not None]
    for m in bad:
        err = m.error()
        if err.code() == KafkaError._PARTITION_EOF:
            continue
        if err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                          KafkaError._UNKNOWN_TOPIC):
            data_loss(f"Topic partition {p.topic}-{p.partition} no longer exists while reading "
                      f"offsets [{p.start}, {p.end}).", p.fail_on_data_loss)
            raise _Lost
        raise KafkaException(err)
    return [m for m in msgs if m.error() is None]


def _gap(consumer: Any, tp: Any, p: RangePartition, expected: int, got: int) -> None:
    """Offsets were skipped: fine for markers/compaction, data loss if they were deleted."""
    if got < expected:
        data_loss(f"Offsets of {p.topic}-{p.partition} went back from {expected} to {got} "
                  "(the topic was probably deleted and re-created).", p.fail_on_data_loss)
        raise _Lost
    low, _ = consumer.get_watermark_offsets(tp, timeout=10.0)
    if low > expected:
        data_loss(f"Offsets [{expected}, {low}) of {p.topic}-{p.partition} are gone: the log now "
                  f"starts at {low}.", p.fail_on_data_loss)


def _idle(consumer: Any, tp: Any, p: RangePartition, next_offset: int,
          idle_since: float) -> int:
    """No message came: maybe the rest of the range holds no records (markers), maybe the data
    is gone, maybe the broker is slow. Returns the next offset to expect."""
    from confluent_kafka import TopicPartition as KTP

    position = consumer.position([KTP(p.topic, p.partition)])[0].offset
    if position >= p.end:
        return p.end
    low, high = consumer.get_watermark_offsets(tp, timeout=10.0, cached=False)
    if low > next_offset:
        data_loss(f"Offsets [{next_offset}, {low}) of {p.topic}-{p.partition} are gone: the log "
                  f"now starts at {low}.", p.fail_on_data_loss)
        if low >= p.end:
            raise _Lost
    if high < p.end and high <= next_offset and high >= 0:
        data_loss(f"{p.topic}-{p.partition} ends at offset {high}, before the offsets "
                  f"[{next_offset}, {p.end}) the query planned to read.", p.fail_on_data_loss)
        raise _Lost
    if time.monotonic() - idle_since > p.poll_timeout_ms / 1000:
        raise TimeoutError(
            f"No records of {p.topic}-{p.partition} arrived for offsets [{next_offset}, {p.end}) "
            f"within kafkaConsumer.pollTimeoutMs={p.poll_timeout_ms} (cluster {p.bootstrap}).")
    return next_offset


def _count_below(msgs: list[Any], end: int) -> int:
    """How many leading messages have offsets < end (offsets ascend)."""
    if msgs[-1].offset() < end:
        return len(msgs)
    lo, hi = 0, len(msgs)
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].offset() < end:
            lo = mid + 1
        else:
            hi = mid
    return lo
