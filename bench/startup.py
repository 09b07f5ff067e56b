"""Broker start-up with many partitions, and the broker's memory per idle partition and per idle
connection; prints figures measured in one run, not a test.

Start-up: a broker gets `--topics` x `--per-topic` partitions (replication factor 1) and a few
records in each, is stopped cleanly (SIGTERM) and restarted, then gets more records in each
partition, is SIGKILLed and restarted (every partition recovers its unflushed tail). A start
is timed from the process launch until broker.json is written (listening) and until a Metadata
request for one topic is answered with all its leaders. Baselines in the same run: the same
for an empty broker, and a plain walk of the data directory that opens and stats every file.
Each clean shutdown is timed too, and each round of records. With `--restarts N`, N more
clean restarts follow, each timed, with the metadata log's size and newest snapshot before it:
every restart adds its shutdown's and its start's leadership changes to the log, and a start
replays the log from the newest snapshot on.

Memory: the broker's VmRSS (from /proc) as the partitions are created (0, 1,000, 5,000,
10,000 by default) and, on another empty broker, with 0 to 10,000 idle connections open to it
from this process (each sends one ApiVersions request first, as a client does, then stays
idle).

Usage, from the repository root:
    python bench/startup.py [--topics 100] [--per-topic 100] [--records 10] [--repeat 3]
                            [--connections 1000,5000,10000] [--only startup,connections]
                            [--restarts 0]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.client.wire import WireClient
from tests.broker_process import BrokerProcess

CHECKPOINTS = (1000, 5000, 10000)  # partition counts at which RSS is read
STOP_TIMEOUT_S = 300  # a clean shutdown of 10,000 partitions takes tens of seconds


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settled_rss(pid: int) -> int:
    """RSS once the broker has been idle a moment (its periodic tasks have run)."""
    time.sleep(1.5)
    return rss_kib(pid)


def topic_names(topics: int) -> list[str]:
    return [f"s{i:03d}" for i in range(topics)]


def timed_start(broker: BrokerProcess, probe_topic: str | None, partitions: int
                ) -> tuple[float, float]:
    """(seconds to broker.json, seconds until a Metadata request shows `probe_topic`'s
    `partitions` leaders), from the launch."""
    started = time.perf_counter()
    broker.launch()
    broker.await_ready()
    listening = time.perf_counter() - started
    with WireClient(broker.bootstrap, timeout_s=60) as client:
        while True:
            if probe_topic is None:
                client.brokers()
                break
            if len(client.leaders([probe_topic])) == partitions:
                break
            time.sleep(0.01)
    return listening, time.perf_counter() - started


def create_partitions(broker: BrokerProcess, topics: list[str], per_topic: int,
                      pid: int) -> list[tuple[int, int]]:
    """Create the topics one at a time (a broker creating a partition fsyncs its directory
    twice, so many at once would hold its event loop past its session); RSS at each checkpoint
    count of partitions."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    samples = [(0, settled_rss(pid))]
    for i, topic in enumerate(topics):
        futures = admin.create_topics([NewTopic(topic, per_topic, 1)],
                                      operation_timeout=120, request_timeout=120)
        for future in futures.values():
            future.result()
        count = (i + 1) * per_topic
        if count in CHECKPOINTS:
            samples.append((count, settled_rss(pid)))
    return samples


def produce_everywhere(broker: BrokerProcess, topics: list[str], per_topic: int,
                       records: int) -> float:
    """`records` records of 100 bytes into every partition; returns the seconds taken."""
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
                         "acks": "1", "queue.buffering.max.messages": 2_000_000,
                         "log_level": 3})
    value = b"x" * 100
    for topic in topics:
        for partition in range(per_topic):
            for _ in range(records):
                producer.produce(topic, value, partition=partition)
        producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("records left unsent")
    return time.perf_counter() - started


def walk_and_open(data_dir: Path) -> tuple[float, int]:
    """Baseline: list every directory under `data_dir`, open, fstat and close every file."""
    started = time.perf_counter()
    files = 0
    for entry in os.scandir(data_dir):
        if not entry.is_dir():
            continue
        for child in os.scandir(entry.path):
            fd = os.open(child.path, os.O_RDONLY)
            os.fstat(fd)
            os.close(fd)
            files += 1
    return time.perf_counter() - started, files


def timed_stop(broker: BrokerProcess) -> float:
    """Seconds a clean shutdown (SIGTERM until the process exits) takes."""
    started = time.perf_counter()
    broker.stop(STOP_TIMEOUT_S)
    return time.perf_counter() - started


def fmt(seconds: float, base: float) -> str:
    return f"{seconds:7.3f} s  (x{seconds / base:6.1f})"


def bench_startup(args: argparse.Namespace, work: Path) -> None:
    topics = topic_names(args.topics)
    partitions = args.topics * args.per_topic
    empty = BrokerProcess(work / "empty", work / "empty.log")
    empty.start()
    empty.stop(STOP_TIMEOUT_S)
    empty_times = []
    for _ in range(args.repeat):
        empty_times.append(timed_start(empty, None, 0))
        empty.stop(STOP_TIMEOUT_S)
    empty_listen = min(t[0] for t in empty_times)
    empty_ready = min(t[1] for t in empty_times)
    print(f"empty broker start: listening {empty_listen:.3f} s, Metadata answered "
          f"{empty_ready:.3f} s (best of {args.repeat})")

    broker = BrokerProcess(work / "full", work / "full.log")
    broker.start()
    assert broker.proc is not None
    started = time.perf_counter()
    samples = create_partitions(broker, topics, args.per_topic, broker.proc.pid)
    print(f"created {partitions} partitions in {time.perf_counter() - started:.1f} s")
    print("broker RSS by partitions (created, no records yet):")
    for count, kib in samples:
        per = f"{(kib - samples[0][1]) / count:6.1f} KiB/partition" if count else ""
        print(f"  {count:6d} partitions: {kib / 1024:7.1f} MiB  {per}")
    took = produce_everywhere(broker, topics, args.per_topic, args.records)
    print(f"produced {args.records} records to each partition in {took:.1f} s; "
          f"RSS {rss_kib(broker.proc.pid) / 1024:.1f} MiB")
    print(f"clean shutdown: {timed_stop(broker):.1f} s")

    walk, files = min(walk_and_open(work / "full") for _ in range(3))
    print(f"baseline walk + open + fstat of {files} files: {walk:.3f} s")
    clean = []
    for _ in range(args.repeat):
        clean.append((*timed_start(broker, topics[-1], args.per_topic), timed_stop(broker)))
    print(f"after a clean shutdown ({args.repeat} starts):")
    for listening, ready, stopped in clean:
        print(f"  listening {fmt(listening, empty_listen)}   Metadata answered "
              f"{fmt(ready, empty_ready)}   x{ready / walk:.1f} of the walk   "
              f"then a clean shutdown {stopped:.1f} s")
    broker.start()
    assert broker.proc is not None
    print(f"RSS after the restart, idle: {settled_rss(broker.proc.pid) / 1024:.1f} MiB")

    print(f"after SIGKILL ({args.repeat} starts, {args.records} more records per partition "
          "before each kill):")
    for _ in range(args.repeat):
        took = produce_everywhere(broker, topics, args.per_topic, args.records)
        broker.kill()
        listening, ready = timed_start(broker, topics[-1], args.per_topic)
        print(f"  listening {fmt(listening, empty_listen)}   Metadata answered "
              f"{fmt(ready, empty_ready)}   x{ready / walk:.1f} of the walk   "
              f"(the records before the kill: {took:.1f} s)")
    print(f"clean shutdown: {timed_stop(broker):.1f} s")
    if args.restarts:
        bench_restarts(broker, topics[-1], args.per_topic, args.restarts, empty_ready)


def metadata_log_state(data_dir: Path) -> str:
    """The metadata log's bytes on disk and its newest snapshot's end offset, from file names."""
    directory = data_dir / "__cluster_metadata-0"
    names = os.listdir(directory)
    size = sum((directory / n).stat().st_size for n in names if n.endswith(".log"))
    snapshots = sorted(int(n.split("-")[0]) for n in names if n.endswith(".checkpoint"))
    return f"metadata log {size / 2**20:5.1f} MiB, newest snapshot at " + \
        (f"offset {snapshots[-1]:,}" if snapshots else "none")


def bench_restarts(broker: BrokerProcess, probe_topic: str, partitions: int, restarts: int,
                   empty_ready: float) -> None:
    """Clean restarts one after another, as a sidecar started on demand sees them: every one
    adds the records of its shutdown and its start to the metadata log, which a start replays
    from the newest snapshot on."""
    print(f"{restarts} clean restarts in a row (each start, then a clean shutdown):")
    for i in range(restarts):
        state = metadata_log_state(broker.data_dir)
        _, ready = timed_start(broker, probe_topic, partitions)
        stopped = timed_stop(broker)
        print(f"  restart {i + 1:3d}: Metadata answered {fmt(ready, empty_ready)}   "
              f"(before it: {state})   then a clean shutdown {stopped:.1f} s", flush=True)


def api_versions_frame(correlation: int) -> bytes:
    client = b"bench"
    body = struct.pack(">hhih", 18, 0, correlation, len(client)) + client
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes:
    head = sock.recv(4, socket.MSG_WAITALL)
    size = struct.unpack(">i", head)[0]
    return sock.recv(size, socket.MSG_WAITALL)


def bench_connections(args: argparse.Namespace, work: Path) -> None:
    counts = [int(c) for c in args.connections.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(counts) * 2 + 512) if hard != resource.RLIM_INFINITY else \
        max(counts) * 2 + 512
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    broker = BrokerProcess(work / "conns", work / "conns.log")
    broker.start()  # inherits this process's limits
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/limits") as f:
        limit = next(line for line in f if line.startswith("Max open files"))
    print(f"broker's {' '.join(limit.split())}")
    base = settled_rss(broker.proc.pid)
    print("broker RSS by idle connections (each sent one ApiVersions request):")
    print(f"  {0:6d} connections: {base / 1024:7.1f} MiB")
    socks: list[socket.socket] = []
    for count in counts:
        while len(socks) < count:
            sock = socket.create_connection((broker.host, broker.port))
            sock.sendall(api_versions_frame(len(socks)))
            read_frame(sock)
            socks.append(sock)
        kib = settled_rss(broker.proc.pid)
        print(f"  {count:6d} connections: {kib / 1024:7.1f} MiB  "
              f"{(kib - base) / count:6.1f} KiB/connection")
    for sock in socks:
        sock.close()
    broker.stop(STOP_TIMEOUT_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--records", type=int, default=10, help="per partition per round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--connections", default="1000,5000,10000")
    parser.add_argument("--only", default="startup,connections")
    parser.add_argument("--keep", action="store_true", help="keep the data and broker logs")
    parser.add_argument("--restarts", type=int, default=0,
                        help="then this many more clean restarts, each timed")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    work = Path(tempfile.mkdtemp(prefix="spark-log-startup-"))
    try:
        if "startup" in args.only:
            bench_startup(args, work)
        if "connections" in args.only:
            bench_connections(args, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
