"""Broker throughput and latency with real librdkafka clients, against the raw limit of this
machine measured in the same run.

* raw limit: the same bytes sent over a loopback socket into a process that appends them to a
  file (no protocol, no broker) — what any broker on this machine could at best reach;
* throughput: kcat (librdkafka, C) produces N records from a file and then consumes them, for
  100-byte and 1 KiB records, acks=1 and acks=all, 1 and 8 partitions;
* end-to-end latency: a confluent-kafka producer at 10,000 records/s and a consumer; each record
  carries its send time, latency = receive time - send time (p50/p99).

Usage: python bench/broker_throughput.py [--records 1000000] [--quick]
Prints one line per case with records/s, MB/s and the ratio to the raw limit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess


def raw_limit_mb_s(total_bytes: int, workdir: Path) -> float:
    """MB/s of loopback socket -> file append for `total_bytes`, in 1 MiB writes."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    sink = workdir / "raw.bin"

    def receive() -> None:
        conn, _ = server.accept()
        with conn, open(sink, "wb") as out:
            while chunk := conn.recv(1 << 20):
                out.write(chunk)

    receiver = threading.Thread(target=receive)
    receiver.start()
    block = bytes(1 << 20)
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as client:
        sent = 0
        while sent < total_bytes:
            client.sendall(block)
            sent += len(block)
    receiver.join()
    elapsed = time.perf_counter() - start
    server.close()
    sink.unlink()
    return total_bytes / elapsed / 1e6


def kcat_produce(bootstrap: str, topic: str, lines: Path, acks: str) -> float:
    start = time.perf_counter()
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", f"acks={acks}",
                    "-X", "linger.ms=5", "-l", str(lines)], check=True)
    return time.perf_counter() - start


def kcat_consume(bootstrap: str, topic: str, expected: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-o", "beginning",
                           "-q", "-f", "x"], check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    got = len(done.stdout)
    if got != expected:
        raise SystemExit(f"consumed {got} records of {expected} from {topic}")
    return elapsed


CONSUMER_SCRIPT = """
import json, struct, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
fetch_wait_ms, give_up_s = int(sys.argv[4]), float(sys.argv[5])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                     "fetch.wait.max.ms": fetch_wait_ms, "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, 0, 0)])
latencies = []
deadline = time.monotonic() + give_up_s
while len(latencies) < total and time.monotonic() < deadline:
    msg = consumer.poll(0.05)  # returns as soon as a record is there (consume(n) would wait for n)
    if msg is not None and msg.error() is None:
        sent = struct.unpack(">d", msg.value()[:8])[0]
        if sent == 0.0:  # the warm-up record: both clients are connected and fetching
            print("ready", flush=True)
            continue
        latencies.append((time.time() - sent) * 1000)
consumer.close()
print(json.dumps(latencies))
"""


def latencies_ms(bootstrap: str, topic: str, rate: int, seconds: float,
                 producer_config: dict[str, object] | None = None, fetch_wait_ms: int = 5,
                 give_up_s: float = 120.0) -> tuple[list[float], int]:
    """(sorted produce-to-consume latencies in ms, records sent) at `rate` records/s to
    partition 0 of `topic`, 100-byte records.

    Producer and consumer run in separate processes (no shared GIL); each record carries its
    wall-clock send time. A new topic per call, so the consumer reads exactly these records;
    it gives up `give_up_s` after it is assigned. A warm-up record goes first, and timing
    starts once the consumer has read it: neither client's start-up (connections, metadata,
    producer id) is counted."""
    total = int(rate * seconds)
    reader = subprocess.Popen([sys.executable, "-c", CONSUMER_SCRIPT, bootstrap, topic,
                               str(total), str(fetch_wait_ms), str(give_up_s)],
                              stdout=subprocess.PIPE, text=True)
    assert reader.stdout is not None
    producer = Producer({"bootstrap.servers": bootstrap, **(producer_config or {})})
    producer.produce(topic, struct.pack(">d", 0.0) + bytes(92), partition=0)
    producer.flush(give_up_s)
    reader.stdout.readline()  # "ready": the consumer has the warm-up record
    start = time.perf_counter()
    for i in range(total):
        wait = start + i / rate - time.perf_counter()
        if wait > 0.0005:
            time.sleep(wait)
        while True:
            try:
                producer.produce(topic, struct.pack(">d", time.time()) + bytes(92), partition=0)
                break
            except BufferError:  # acknowledgements stalled and the client queue is full
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(30)
    latencies = sorted(json.loads(reader.stdout.read()))
    reader.wait(30)
    return latencies, total


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[max(0, int(fraction * len(ordered)) - 1)]


def end_to_end_latency(bootstrap: str, topic: str, rate: int, seconds: float,
                       linger_ms: int = 5) -> tuple[float, ...]:
    """(p50 ms, p99 ms, fraction received) of produce-to-consume latency at `rate` records/s."""
    latencies, total = latencies_ms(bootstrap, topic, rate, seconds, {"linger.ms": linger_ms})
    return (statistics.median(latencies), percentile(latencies, 0.99), len(latencies) / total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100-byte, 1 partition, acks=1 only")
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is needed (apt-get install kcat)")
    workdir = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    broker = BrokerProcess(workdir / "data", workdir / "broker.log").start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    results = []
    try:
        cases = [(100, "1", 1)] if args.quick else [
            (size, acks, parts) for size in (100, 1024) for acks in ("1", "all")
            for parts in (1, 8)]
        for size, acks, parts in cases:
            count = args.records if size == 100 else args.records // 4
            lines = workdir / f"lines-{size}.txt"
            if not lines.exists():
                lines.write_bytes((b"x" * (size - 1) + b"\n") * count)
            raw = raw_limit_mb_s(count * size, workdir)
            topic = f"bench-{size}-{acks}-{parts}"
            admin.create_topics([NewTopic(topic, parts)])[topic].result(30)
            produce_s = kcat_produce(broker.bootstrap, topic, lines, acks)
            consume_s = kcat_consume(broker.bootstrap, topic, count)
            mb = count * size / 1e6
            row = {"record_bytes": size, "acks": acks, "partitions": parts, "records": count,
                   "produce_rec_s": count / produce_s, "produce_mb_s": mb / produce_s,
                   "consume_rec_s": count / consume_s, "consume_mb_s": mb / consume_s,
                   "raw_mb_s": raw}
            row["produce_ratio_to_raw"] = row["produce_mb_s"] / raw
            row["consume_ratio_to_raw"] = row["consume_mb_s"] / raw
            results.append(row)
            print(f"{size:>5} B acks={acks:<3} partitions={parts}: produce "
                  f"{row['produce_rec_s']:>9,.0f} rec/s {row['produce_mb_s']:6.1f} MB/s "
                  f"(x{row['produce_ratio_to_raw']:.3f} raw) | consume "
                  f"{row['consume_rec_s']:>9,.0f} rec/s {row['consume_mb_s']:6.1f} MB/s "
                  f"(x{row['consume_ratio_to_raw']:.3f} raw) | raw {raw:.0f} MB/s", flush=True)
        for name in ("bench-warmup", "bench-latency-5", "bench-latency-0"):
            admin.create_topics([NewTopic(name, 1)])[name].result(30)
        # warm-up: the first consumer group creates __consumer_offsets (50 partitions)
        end_to_end_latency(broker.bootstrap, "bench-warmup", 10_000, 1)
        for linger in (5, 0):
            p50, p99, delivered = end_to_end_latency(broker.bootstrap, f"bench-latency-{linger}",
                                                     10_000, 5, linger)
            print(f"end-to-end latency at 10,000 rec/s, linger.ms={linger}: p50 {p50:.2f} ms, "
                  f"p99 {p99:.2f} ms ({delivered:.0%} received)")
            results.append({"linger_ms": linger, "latency_p50_ms": p50, "latency_p99_ms": p99})
        print(json.dumps(results))
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
