"""`spark-log perf produce|consume`: throughput and latency, with the flags of Kafka's
kafka-producer-perf-test and kafka-consumer-perf-test.

`perf produce` sends `--num-records` records of `--record-size` bytes to an existing topic,
optionally throttled to `--throughput` records/s, and prints records/s, MB/s and latency
percentiles (latency = send to delivery report, as Kafka's tool measures it). `perf consume`
reads `--messages` records from the beginning of every partition and prints MB/s and
records/s; it gives up after `--timeout` ms without a record, as Kafka's tool does, and then
exits 1. On a terminal both draw a progress bar; `--json` prints one JSON object instead of
the text line, for scripts and benchmarks. Without `--bootstrap-server` both use the sidecar
broker, as every `spark-log` tool does.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from .arguments import key_values
from .connect import Connection, add_connection_arguments, connect, partition_count
from .errors import CliError, UsageError
from .output import Tracker, notice, print_json, progress


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


def add_perf_parser(commands: Any) -> None:
    perf = commands.add_parser("perf", help="measure produce and consume throughput")
    kinds = perf.add_subparsers(dest="perf_command", metavar="KIND", required=True)
    produce = kinds.add_parser("produce", help="like kafka-producer-perf-test")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=int, required=True)
    produce.add_argument("--record-size", type=int, default=100, help="bytes (default 100)")
    produce.add_argument("--throughput", type=float, default=-1,
                         help="records/s to aim at; -1 (default) for as fast as possible")
    produce.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                         help="producer settings (Kafka's names)")
    produce.add_argument("--json", action="store_true", help="print one JSON object")
    add_connection_arguments(produce)
    produce.set_defaults(run=_produce_command)
    consume = kinds.add_parser("consume", help="like kafka-consumer-perf-test")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--messages", "--num-records", dest="messages", type=int,
                         required=True, help="records to read")
    consume.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE",
                         help="consumer settings (Kafka's names)")
    consume.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                         help="give up after this many ms without a record (default 10000)")
    consume.add_argument("--json", action="store_true", help="print one JSON object")
    add_connection_arguments(consume)
    consume.set_defaults(run=_consume_command)


def _at_least(value: float, low: float, flag: str) -> None:
    if value < low:
        raise UsageError(f"{flag} must be at least {low:g}, got {value:g}")


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(fraction * len(sorted_values)))
    return sorted_values[index]


def run_produce(connection: Connection, topic: str, num_records: int, record_size: int,
                throughput: float, props: dict[str, str], bar: Tracker) -> ProduceResult:
    producer = connection.producer(**{"linger.ms": 5, **props})
    payload = bytes(record_size)
    latencies: list[float] = []
    errors = 0

    def delivered(err: Any, sent_at: float) -> None:
        nonlocal errors
        errors += err is not None
        latencies.append((time.perf_counter() - sent_at) * 1000)
        bar.advance()

    start = time.perf_counter()
    for i in range(num_records):
        if throughput > 0:
            _throttle(start, i, throughput, producer)
        sent_at = time.perf_counter()
        while True:
            try:
                producer.produce(topic, payload,
                                 on_delivery=lambda e, _m, t=sent_at: delivered(e, t))
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


def _throttle(start: float, sent: int, throughput: float, producer: Any) -> None:
    due = start + sent / throughput
    while (wait := due - time.perf_counter()) > 0:
        producer.poll(min(wait, 0.01))


def run_consume(connection: Connection, topic: str, messages: int, props: dict[str, str],
                timeout_ms: int, partitions: int, bar: Tracker) -> ConsumeResult:
    """Read up to `messages` records from the beginning; stop after `timeout_ms` without one."""
    consumer = connection.consumer(**{"group.id": f"perf-consumer-{uuid.uuid4().hex[:12]}",
                                      "enable.auto.commit": False, **props})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = size = 0
    start = last = time.perf_counter()
    try:
        while count < messages and time.perf_counter() - last < timeout_ms / 1000:
            batch = consumer.consume(min(10_000, messages - count), 0.2)
            for msg in batch:
                if msg.error() is not None:
                    raise CliError(f"reading {topic}: {msg.error().str()}")
                size += len(msg.value() or b"")
            if batch:
                count += len(batch)
                last = time.perf_counter()
                bar.advance(len(batch))
    finally:
        consumer.close()
    seconds = time.perf_counter() - start
    return ConsumeResult(records=count, seconds=seconds, records_per_sec=count / seconds,
                         mb_per_sec=size / seconds / 1e6, bytes=size)


def _produce_command(args: argparse.Namespace) -> int:
    _at_least(args.num_records, 1, "--num-records")
    _at_least(args.record_size, 0, "--record-size")
    props = key_values(args.producer_props, "--producer-props")
    connection = connect(args)
    partition_count(connection.admin(), args.topic)
    with progress("producing", args.num_records) as bar:
        result = run_produce(connection, args.topic, args.num_records, args.record_size,
                             args.throughput, props, bar)
    if args.json:
        print_json(asdict(result))
    else:
        print(f"{result.records} records sent, {result.records_per_sec:.1f} records/sec "
              f"({result.mb_per_sec:.2f} MB/sec), {result.latency_ms_avg:.2f} ms avg latency, "
              f"{result.latency_ms_max:.2f} ms max latency, {result.latency_ms_p50:.2f} ms 50th, "
              f"{result.latency_ms_p95:.2f} ms 95th, {result.latency_ms_p99:.2f} ms 99th, "
              f"{result.latency_ms_p999:.2f} ms 99.9th.")
    if result.errors:
        raise CliError(f"{result.errors} of {result.records} records were not delivered")
    return 0


def _consume_command(args: argparse.Namespace) -> int:
    _at_least(args.messages, 1, "--messages")
    _at_least(args.timeout, 0, "--timeout")
    props = key_values(args.consumer_props, "--consumer-props")
    connection = connect(args)
    partitions = partition_count(connection.admin(), args.topic)
    with progress("consuming", args.messages) as bar:
        result = run_consume(connection, args.topic, args.messages, props, args.timeout,
                             partitions, bar)
    if args.json:
        print_json(asdict(result))
    else:
        print("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, seconds")
        print(f"{result.bytes / 1e6:.4f}, {result.mb_per_sec:.4f}, {result.records}, "
              f"{result.records_per_sec:.1f}, {result.seconds:.3f}")
    if result.records < args.messages:
        notice(f"Stopped after {result.records} of {args.messages} records: none came for "
               f"{args.timeout} ms (raise --timeout to wait longer).")
        return 1
    return 0
