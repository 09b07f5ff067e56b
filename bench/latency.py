"""End-to-end latency at 10,000 records/s with linger.ms=0, alone and with a second such load at
the same time, against librdkafka's C mock broker measured the same way in the same run.

Each load is a confluent-kafka producer (this process) sending 100-byte records to partition 0
of its own topic at the rate, and a consumer in its own process; latency = receive time - the
send time the record carries (see bench/broker_throughput.py, whose measuring code this uses).
The mock broker is the one librdkafka starts inside a client given `test.mock.num.brokers`; its
listener is a real loopback port, found in that client's log, so the same producers and
consumers reach it.

Usage: python bench/latency.py [--seconds 10] [--rate 10000]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_throughput import latencies_ms, percentile
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess


def mock_broker() -> tuple[Producer, str]:
    """A client holding librdkafka's mock cluster (one broker), and its bootstrap address."""
    text = io.StringIO()
    logger = logging.getLogger("mock-cluster")
    logger.addHandler(logging.StreamHandler(text))
    logger.setLevel(logging.INFO)
    holder = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "unused:1",
                       "logger": logger})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        holder.poll(0.05)
        found = re.search(r"replaced with (\S+)", text.getvalue())
        if found:
            return holder, found.group(1)
    raise SystemExit("librdkafka's mock cluster did not log its address")


def loads(bootstrap: str, topics: list[str], rate: int, seconds: float) -> list[float]:
    """Run one latency load per topic at once; their latencies in ms, sorted, together."""
    results: list[list[float]] = [[] for _ in topics]

    def run(i: int) -> None:
        results[i] = latencies_ms(bootstrap, topics[i], rate, seconds, {"linger.ms": 0})[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(topics))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(x for r in results for x in r)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=10_000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    broker = BrokerProcess(workdir / "data", workdir / "broker.log").start()
    holder, mock = mock_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = ["warm", "alone", "two-a", "two-b"]
    for name in names:
        admin.create_topics([NewTopic(name, 1)])[name].result(30)
    results = {}
    try:
        for target, bootstrap in (("spark_log", broker.bootstrap), ("mock", mock)):
            loads(bootstrap, ["warm"], args.rate, 1)  # connections, group, producer ids
            for case, topics in (("one load", ["alone"]), ("two loads", ["two-a", "two-b"])):
                got = loads(bootstrap, topics, args.rate, args.seconds)
                p50, p99 = statistics.median(got), percentile(got, 0.99)
                results[f"{target} {case}"] = (p50, p99)
                print(f"{target:>9}, {case}: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                      f"({len(got):,} records)", flush=True)
        for case in ("one load", "two loads"):
            ours, theirs = results[f"spark_log {case}"], results[f"mock {case}"]
            print(f"{case}: p99 x{ours[1] / theirs[1]:.2f} of the mock broker's "
                  f"(p50 x{ours[0] / theirs[0]:.2f})")
        print(json.dumps(results))
    finally:
        del holder
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
