"""The request path under librdkafka's own load generator, against librdkafka's C mock broker
measured in the same run.

`rdkafka_performance` (librdkafka's examples/, built from source with CMake) produces and
consumes against one `spark-log broker` and, for the same command, against the mock broker it
starts inside itself (`-X test.mock.num.brokers=1`). Cases:

* one-record produce requests (`-X linger.ms=0 -X batch.num.messages=1`), acks=1: requests/s,
  ratio to the mock broker;
* the same from 8 producers at once (one partition each): requests/s in all;
* 8 consumers reading one partition each of those one-record batches, one batch per fetch
  (`fetch.message.max.bytes=1`): fetch requests/s, counted by the broker's own metrics;
* `reread`: the same 8 consumers after a clean restart of the broker, so every batch they read
  is checked on its first read (start-up checks only each active segment's tail): fetch
  requests/s and the broker's CPU seconds;
* `eight-mock`: 8 consumers as in `eight`, against spark_log and against the mock broker in
  the same run, each log `--pair-batches` one-record batches a partition: fetches/s, and the CPU
  microseconds a fetch of each broker and of the consumers. The mock broker runs in a thread of
  this process (a confluent-kafka producer with `test.mock.num.brokers=1` fills it and keeps it
  up), with one one-partition topic per consumer. It finds a fetch's batch by walking its
  partition's list of batches from the start, so its cost grows with the log: keep the logs
  short for a fair pair. The consumers' CPU a fetch bounds the rate any broker can be fetched
  from on this machine: cores x 1 s / that;
* batched produce of 100 B records, acks=1 and acks=all, and consume: records/s and ratio,
  and the broker's CPU seconds per GB produced (on two cores the load generator competes with
  the broker, so its CPU shows a change that throughput alone hides).

Usage: python bench/request_path.py --rdkafka-performance PATH [--requests 30000]
       [--records 1000000] [--pair-batches 4000] [--only one,eight,reread,batched,eight-mock]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.prometheus_samples import scrape_port

_RATE = re.compile(rb"(\d+) messages (?:produced|\(\d+ bytes\) consumed).*? in (\d+)ms")
_SERVING = re.compile(rb"Serving Prometheus metrics on http://[^:]+:(\d+)/metrics")
ONE_RECORD = ["-X", "linger.ms=0", "-X", "batch.num.messages=1"]


def run_perf(perf: str, args: list[str], bootstrap: str | None) -> tuple[int, float]:
    """(records, seconds) as rdkafka_performance reports them; `bootstrap` None = mock broker."""
    target = ["-X", "test.mock.num.brokers=1"] if bootstrap is None else ["-b", bootstrap]
    out = subprocess.run([perf, *args, *target], capture_output=True, timeout=600)
    found = _RATE.findall(out.stdout + out.stderr)
    if out.returncode != 0 or not found:
        raise SystemExit(f"rdkafka_performance {' '.join(args)} failed:\n"
                         f"{(out.stdout + out.stderr).decode(errors='replace')[-2000:]}")
    records, ms = found[-1]
    return int(records), int(ms) / 1000


def run_parallel(perf: str, argvs: list[list[str]], bootstrap: str) -> tuple[int, float]:
    """Run several rdkafka_performance at once; (their records in all, wall seconds)."""
    started = time.perf_counter()
    procs = [subprocess.Popen([perf, *a, "-b", bootstrap], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for a in argvs]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    wall = time.perf_counter() - started
    total = 0
    for proc, out in zip(procs, outs, strict=True):
        found = _RATE.findall(out)
        if proc.returncode != 0 or not found:
            raise SystemExit(f"a parallel rdkafka_performance failed:\n{out.decode()[-2000:]}")
        total += int(found[-1][0])
    return total, wall


def children_cpu_seconds() -> float:
    """User and system CPU time of this process's ended (and waited-for) children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def own_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def eight_consumers_of(topics: list[tuple[str, int]], n: int) -> list[list[str]]:
    return [["-C", "-t", topic, "-p", str(p), "-c", str(n), "-o", "beginning",
             "-X", "fetch.message.max.bytes=1"] for topic, p in topics]


def mock_broker(topics: list[str], batches: int) -> tuple[Producer, str]:
    """A mock broker in a thread of this process, each topic's partition 0 holding `batches`
    one-record batches of 100 B; the producer that keeps it up, and where it listens."""
    producer = Producer({"test.mock.num.brokers": 1, "linger.ms": 0,
                         "batch.num.messages": 1})
    broker = next(iter(producer.list_topics(timeout=30).brokers.values()))
    for topic in topics:
        for _ in range(batches):
            while True:
                try:
                    producer.produce(topic, b"x" * 100, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(60) != 0:
            raise SystemExit("the mock broker did not take every record")
    return producer, f"{broker.host}:{broker.port}"


def eight_consumers_pair(perf: str, broker: BrokerProcess, batches: int,
                         report: Callable[[str, float, str], None]) -> None:
    """The `eight-mock` case: one run against each broker, logs of the same length."""
    run_parallel(perf, [produce_args("pair", p, batches, 100, "1", True) for p in range(8)],
                 broker.bootstrap)
    assert broker.proc is not None
    cpu, children = cpu_seconds(broker.proc.pid), children_cpu_seconds()
    total, wall = run_parallel(perf, eight_consumers_of([("pair", p) for p in range(8)],
                                                        batches), broker.bootstrap)
    ours_cpu = (cpu_seconds(broker.proc.pid) - cpu) / total * 1e6
    ours_clients = (children_cpu_seconds() - children) / total * 1e6
    ours = total / wall
    topics = [f"pair-mock-{p}" for p in range(8)]
    producer, bootstrap = mock_broker(topics, batches)
    own, children = own_cpu_seconds(), children_cpu_seconds()
    total, wall = run_parallel(perf, eight_consumers_of([(t, 0) for t in topics], batches),
                               bootstrap)
    mock_cpu = (own_cpu_seconds() - own) / total * 1e6
    mock_clients = (children_cpu_seconds() - children) / total * 1e6
    del producer
    mock = total / wall
    bound = (os.cpu_count() or 1) * 1e6 / ((ours_clients + mock_clients) / 2)
    report("eight_mock_ratio", ours / mock,
           f"8 consumers, {batches:,} one-record batches a partition, one batch a fetch: "
           f"{ours:,.0f} fetches/s vs mock {mock:,.0f} = x{ours / mock:.2f}; CPU a fetch: "
           f"broker {ours_cpu:.0f} us vs mock {mock_cpu:.0f} us, consumers {ours_clients:.0f} "
           f"us vs {mock_clients:.0f} us (their bound on {os.cpu_count()} cores: "
           f"{bound:,.0f} fetches/s)")


def serving_port(log_path: Path, earlier: int = 0) -> int:
    """The metrics port the broker logged (it logs it just after it starts serving), once
    more than `earlier` starts have logged theirs."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _SERVING.findall(log_path.read_bytes())
        if len(found) > earlier:
            return int(found[-1])
        time.sleep(0.05)
    raise SystemExit(f"the broker did not log its metrics port in {log_path}")


def fetch_requests(port: int) -> float:
    samples = scrape_port(port)
    return sum(v for (name, labels), v in samples.items()
               if name == "spark_log_requests_total" and ("api", "FETCH") in labels)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def eight_consumers(n: int) -> list[list[str]]:
    return [["-C", "-t", "eight", "-p", str(p), "-c", str(n // 2), "-o", "beginning",
             "-X", "fetch.message.max.bytes=1"] for p in range(8)]


def produce_args(topic: str, partition: int, count: int, size: int, acks: str,
                 one_record: bool) -> list[str]:
    args = ["-P", "-t", topic, "-p", str(partition), "-s", str(size), "-c", str(count),
            "-a", acks]
    return args + ONE_RECORD if one_record else args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rdkafka-performance", required=True,
                        help="librdkafka's examples/rdkafka_performance binary")
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--pair-batches", type=int, default=4000,
                        help="batches a partition in the eight-mock case")
    parser.add_argument("--only", default="one,eight,reread,batched,eight-mock")
    args = parser.parse_args()
    perf, only = args.rdkafka_performance, set(args.only.split(","))
    workdir = Path(tempfile.mkdtemp(prefix="bench-request-path-"))
    broker = BrokerProcess(workdir / "data", workdir / "broker.log", metrics_port=0).start()
    metrics_port = serving_port(Path(broker.log_path))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, parts in (("one", 1), ("eight", 8), ("batched", 1), ("pair", 8)):
        admin.create_topics([NewTopic(name, parts)])[name].result(30)
    results: dict[str, float] = {}

    def report(key: str, value: float, text: str) -> None:
        results[key] = value
        print(text, flush=True)

    try:
        n = args.requests
        if "one" in only:
            for round_ in (1, 2):
                ours = run_perf(perf, produce_args("one", 0, n, 100, "1", True), broker.bootstrap)
                mock = run_perf(perf, produce_args("one", 0, n, 100, "1", True), None)
                ratio = (ours[0] / ours[1]) / (mock[0] / mock[1])
                report(f"one_record_ratio_{round_}", ratio,
                       f"one-record produce requests, acks=1, round {round_}: "
                       f"{ours[0] / ours[1]:,.0f} req/s vs mock {mock[0] / mock[1]:,.0f} "
                       f"req/s = x{ratio:.2f}")
        if "eight" in only:
            total, wall = run_parallel(perf, [produce_args("eight", p, n // 2, 100, "1", True)
                                              for p in range(8)], broker.bootstrap)
            report("eight_producers_req_s", total / wall,
                   f"8 producers, one-record requests: {total / wall:,.0f} req/s in all "
                   f"({total:,} in {wall:.2f} s)")
            before = fetch_requests(metrics_port)
            total, wall = run_parallel(perf, eight_consumers(n), broker.bootstrap)
            fetches = fetch_requests(metrics_port) - before
            report("eight_consumers_fetch_req_s", fetches / wall,
                   f"8 consumers, one partition each, one batch a fetch: "
                   f"{fetches / wall:,.0f} fetch req/s ({total:,} records in {wall:.2f} s)")
        if "reread" in only:
            if "eight" not in only:
                run_parallel(perf, [produce_args("eight", p, n // 2, 100, "1", True)
                                    for p in range(8)], broker.bootstrap)
            earlier = len(_SERVING.findall(Path(broker.log_path).read_bytes()))
            broker.restart()
            metrics_port = serving_port(Path(broker.log_path), earlier)
            assert broker.proc is not None
            cpu, before = cpu_seconds(broker.proc.pid), fetch_requests(metrics_port)
            total, wall = run_parallel(perf, eight_consumers(n), broker.bootstrap)
            fetches = fetch_requests(metrics_port) - before
            cpu = cpu_seconds(broker.proc.pid) - cpu
            report("reread_fetch_req_s", fetches / wall,
                   f"8 consumers reading back after a restart, one batch a fetch: "
                   f"{fetches / wall:,.0f} fetch req/s; broker CPU {cpu:.1f} s "
                   f"({cpu / fetches * 1e6:.0f} us a fetch)")
        if "eight-mock" in only:
            eight_consumers_pair(perf, broker, args.pair_batches, report)
        if "batched" in only:
            for acks in ("1", "-1"):
                assert broker.proc is not None
                cpu = cpu_seconds(broker.proc.pid)
                ours = run_perf(perf, produce_args("batched", 0, args.records, 100, acks, False),
                                broker.bootstrap)
                cpu = cpu_seconds(broker.proc.pid) - cpu
                mock = run_perf(perf, produce_args("batched", 0, args.records, 100, acks, False),
                                None)
                ratio = (ours[0] / ours[1]) / (mock[0] / mock[1])
                results[f"batched_acks{acks}_cpu_s_per_gb"] = cpu / (ours[0] * 100 / 1e9)
                report(f"batched_acks{acks}_ratio", ratio,
                       f"batched produce 100 B, acks={acks}: {ours[0] / ours[1]:,.0f} rec/s "
                       f"vs mock {mock[0] / mock[1]:,.0f} rec/s = x{ratio:.2f}; broker CPU "
                       f"{cpu / (ours[0] * 100 / 1e9):.1f} s per GB")
            records, seconds = run_perf(perf, ["-C", "-t", "batched", "-p", "0", "-c",
                                               str(args.records), "-o", "beginning"],
                                        broker.bootstrap)
            report("consume_rec_s", records / seconds,
                   f"consume {records:,} x 100 B: {records / seconds:,.0f} rec/s")
        print(json.dumps(results))
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
