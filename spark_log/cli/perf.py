"""`spark-log perf produce|consume`: throughput and latency, like Kafka's perf-test tools.

`perf produce` sends `--num-records` records of `--record-size` bytes with librdkafka, optionally
throttled to `--throughput` records/s, and prints records/s, MB/s and latency percentiles
(latency = send to delivery report, as kafka-producer-perf-test measures it); the topic must
exist. `perf consume`
reads `--messages` records from the beginning and prints MB/s and records/s. `--json` prints one
JSON object instead, for scripts and benchmarks. Without `--bootstrap-server` both use the
sidecar broker, as every `spark-log` tool does.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from .connect import add_connection_arguments, connect, partition_count


@dataclass
class ProduceResult:
    records: int
    seconds: float
    records_per_sec: float
    mb_per_sec: float
    latency_ms_avg: float
    latency_ms_max: float
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_p99: float
    latency_ms_p999: float
    errors: int


@dataclass
class ConsumeResult:
    records: int
    seconds: float
    records_per_sec: float
    mb_per_sec: float
    bytes: int


def parse_props(items: list[str]) -> dict[str, str]:
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: expected KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(fraction * len(sorted_values)))
    return sorted_values[index]


def run_produce(bootstrap: str, topic: str, num_records: int, record_size: int,
                throughput: float, props: dict[str, str]) -> ProduceResult:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **props})
    payload = bytes(record_size)
    latencies: list[float] = []
    errors = 0

    def delivered(err: Any, _msg: Any, sent_at: float) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
        latencies.append((time.perf_counter() - sent_at) * 1000)

    start = time.perf_counter()
    for i in range(num_records):
        if throughput > 0:
            _throttle(start, i, throughput, producer)
        sent_at = time.perf_counter()
        while True:
            try:
                producer.produce(topic, payload,
                                 on_delivery=lambda e, m, t=sent_at: delivered(e, m, t))
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.01)
        producer.poll(0)
    producer.flush()
    seconds = time.perf_counter() - start
    latencies.sort()
    return ProduceResult(
        records=num_records, seconds=seconds, records_per_sec=num_records / seconds,
        mb_per_sec=num_records * record_size / seconds / 1e6,
        latency_ms_avg=sum(latencies) / max(1, len(latencies)),
        latency_ms_max=latencies[-1] if latencies else 0.0,
        latency_ms_p50=percentile(latencies, 0.50), latency_ms_p95=percentile(latencies, 0.95),
        latency_ms_p99=percentile(latencies, 0.99), latency_ms_p999=percentile(latencies, 0.999),
        errors=errors)


def _throttle(start: float, sent: int, throughput: float, producer: Producer) -> None:
    due = start + sent / throughput
    while (wait := due - time.perf_counter()) > 0:
        producer.poll(min(wait, 0.01))


def run_consume(bootstrap: str, topic: str, messages: int, props: dict[str, str],
                timeout_s: float = 60.0) -> ConsumeResult:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"perf-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, **props})
    metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None:
        consumer.close()
        raise SystemExit(f"error: topic {topic!r} not found on {bootstrap}")
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions])
    count = size = 0
    start = time.perf_counter()
    deadline = start + timeout_s
    try:
        while count < messages and time.perf_counter() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                count += 1
                size += len(msg.value() or b"")
    finally:
        consumer.close()
    seconds = time.perf_counter() - start
    return ConsumeResult(records=count, seconds=seconds, records_per_sec=count / seconds,
                         mb_per_sec=size / seconds / 1e6, bytes=size)


def add_perf_parser(commands: Any) -> None:
    perf = commands.add_parser("perf", help="measure produce and consume throughput")
    kinds = perf.add_subparsers(dest="perf_command", metavar="KIND", required=True)
    produce = kinds.add_parser("produce", help="like kafka-producer-perf-test")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=int, required=True)
    produce.add_argument("--record-size", type=int, default=100)
    produce.add_argument("--throughput", type=float, default=-1,
                         help="records/s to aim at; -1 for as fast as possible")
    produce.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    produce.add_argument("--json", action="store_true", help="print one JSON object")
    add_connection_arguments(produce)
    produce.set_defaults(run=_produce_command)
    consume = kinds.add_parser("consume", help="like kafka-consumer-perf-test")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--messages", type=int, required=True)
    consume.add_argument("--consumer-props", nargs="*", default=[], metavar="KEY=VALUE")
    consume.add_argument("--timeout", type=float, default=60.0, help="seconds to wait at most")
    consume.add_argument("--json", action="store_true", help="print one JSON object")
    add_connection_arguments(consume)
    consume.set_defaults(run=_consume_command)


def _produce_command(args: argparse.Namespace) -> int:
    connection = connect(args)
    partition_count(connection.admin(), args.topic)
    result = run_produce(connection.bootstrap, args.topic, args.num_records, args.record_size,
                         args.throughput, {**connection.settings,
                                           **parse_props(args.producer_props)})
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(f"{result.records} records sent, {result.records_per_sec:.1f} records/sec "
              f"({result.mb_per_sec:.2f} MB/sec), {result.latency_ms_avg:.2f} ms avg latency, "
              f"{result.latency_ms_max:.2f} ms max latency, {result.latency_ms_p50:.2f} ms 50th, "
              f"{result.latency_ms_p95:.2f} ms 95th, {result.latency_ms_p99:.2f} ms 99th, "
              f"{result.latency_ms_p999:.2f} ms 99.9th.")
    return 1 if result.errors else 0


def _consume_command(args: argparse.Namespace) -> int:
    connection = connect(args)
    result = run_consume(connection.bootstrap, args.topic, args.messages,
                         {**connection.settings, **parse_props(args.consumer_props)},
                         args.timeout)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, seconds")
        print(f"{result.bytes / 1e6:.4f}, {result.mb_per_sec:.4f}, {result.records}, "
              f"{result.records_per_sec:.1f}, {result.seconds:.3f}")
    return 0 if result.records >= args.messages else 1
