"""What replication costs and how long a partition is unavailable when its leader dies, on three
real nodes (combined mode) on loopback ports.

* throughput (`--throughput`): a confluent-kafka producer, acks=all, `--records` records of
  100 bytes, to a topic with replication factor 3 and to one with replication factor 1 on the
  same cluster, in interleaved rounds; records/s for each and the ratio RF 3 / RF 1;
* latency (`--latency`): records stamped with their send time, produced at a paced 10,000
  records/s with acks=all to a topic with replication factor 3; a consumer in another process
  measures receive - send time; p50, p99, max. Settings as Kafka's end-to-end latency tool
  (`kafka.tools.EndToEndLatency`): producer linger.ms=0, consumer fetch wait 0 — plus, for
  comparison with the single-broker figures, librdkafka's default linger.ms=5;
* unavailability (`--unavailability`): an idempotent acks=all producer writing continuously to
  a partition with replication factor 3 and min.insync.replicas=2, and a tailing consumer; each
  round SIGKILLs the partition's leader and times, from the kill, the first acknowledgement and
  the first read of a record produced after it; the killed node is restarted and back in the
  ISR before the next round. Every send, acknowledgement and read is recorded, and the history
  is checked at the end (tests/cluster/history.py).

With none of the three flags, all three run. `--rf1-only` uses replication factor 1 throughout
(min.insync.replicas=1; in the unavailability rounds the killed node, the only replica, is
restarted at once, so a round measures restart and recovery). `--smoke` makes every part small.
A part whose records are not acknowledged within `--give-up` seconds says so and the next part
runs. Benchmarks are not tests: nothing here asserts a speed.

Usage: python bench/replication.py [--throughput] [--latency] [--unavailability]
           [--records 500000] [--repeat 3] [--rounds 5] [--rf1-only] [--smoke]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.broker_throughput import latencies_ms, percentile
from bench.cluster_failover import active_controller, bench_cluster
from tests.cluster.cluster_support import describe_topic, leaders_of, wait_for
from tests.cluster.history import (
    ContinuousProducer,
    History,
    TailingConsumer,
    continuous_run,
    final_read,
)
from tests.cluster_process import ClusterProcess

RECORD_BYTES = 100
LATENCY_RATE = 10_000


def create(bootstrap: str, name: str, partitions: int, rf: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result is in
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(60)


def min_insync(rf: int) -> str:
    return "2" if rf >= 3 else "1"


# -- throughput ------------------------------------------------------------------------------

def produce_rate(bootstrap: str, topic: str, records: int, give_up_s: float
                 ) -> tuple[float, int, collections.Counter[str]]:
    """(acknowledged records/s, records acknowledged, delivery errors by kind) for `records`
    records of RECORD_BYTES produced with acks=all as fast as the client takes them."""
    errors: collections.Counter[str] = collections.Counter()

    def on_error(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors[err.name()] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": int(give_up_s * 1000),
                         # only failures reach the callback: no per-record Python work
                         "delivery.report.only.error": True, "on_delivery": on_error})
    value = bytes(RECORD_BYTES)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # the client queue is full: let acknowledgements drain it
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    unacknowledged = producer.flush(give_up_s + 5)
    elapsed = time.perf_counter() - start
    acknowledged = records - unacknowledged - sum(errors.values())
    return acknowledged / elapsed, acknowledged, errors


def throughput(cluster: ClusterProcess, args: argparse.Namespace) -> None:
    factors = [1] if args.rf1_only else [3, 1]
    best: dict[int, float] = {}
    print(f"throughput: {args.records:,} records of {RECORD_BYTES} B, acks=all, "
          f"{args.partitions} partitions, replication factors {factors}")
    for round_ in range(args.repeat):
        for rf in factors:  # interleaved, so that drift in the machine's load hits both
            topic = f"throughput-rf{rf}-{round_}"
            create(cluster.bootstrap, topic, args.partitions, rf,
                   **{"min.insync.replicas": min_insync(rf)})
            rate, acked, errors = produce_rate(cluster.bootstrap, topic, args.records,
                                               args.give_up)
            best[rf] = max(best.get(rf, 0.0), rate)
            note = "" if acked == args.records else (
                f" — only {acked:,} of {args.records:,} acknowledged, errors {dict(errors)}")
            print(f"  round {round_ + 1}, RF {rf}: {rate:,.0f} records/s{note}", flush=True)
    summary = ", ".join(f"RF {rf} {best[rf]:,.0f} records/s" for rf in factors)
    ratio = f"; RF 3 / RF 1 = {best[3] / best[1]:.2f}" if 3 in best and best[1] > 0 else ""
    print(f"throughput, best of {args.repeat}: {summary}{ratio}")


# -- latency ---------------------------------------------------------------------------------

def latency(cluster: ClusterProcess, args: argparse.Namespace) -> None:
    rf = 1 if args.rf1_only else 3
    create(cluster.bootstrap, "latency-warmup", 1, rf, **{"min.insync.replicas": min_insync(rf)})
    # warm-up: the first consumer group's coordinator lookup, connections to every node
    latencies_ms(cluster.bootstrap, "latency-warmup", LATENCY_RATE, 1,
                 {"acks": "all", "linger.ms": 5}, give_up_s=args.give_up)
    for linger in args.linger:
        topic = f"latency-rf{rf}-linger{linger}"
        create(cluster.bootstrap, topic, 1, rf, **{"min.insync.replicas": min_insync(rf)})
        found, sent = latencies_ms(
            cluster.bootstrap, topic, LATENCY_RATE, args.seconds,
            {"acks": "all", "linger.ms": linger, "enable.idempotence": args.idempotent,
             "message.timeout.ms": int(args.give_up * 1000)},
            fetch_wait_ms=args.fetch_wait_ms, give_up_s=args.seconds + args.give_up)
        head = (f"end-to-end latency, RF {rf}, acks=all, {LATENCY_RATE:,} records/s for "
                f"{args.seconds:g} s, linger.ms={linger}, fetch wait {args.fetch_wait_ms} ms"
                + (", idempotent" if args.idempotent else ""))
        if not found:
            print(f"{head}: no record received within {args.give_up:g} s")
            continue
        print(f"{head}: p50 {statistics.median(found):.1f} ms, p99 "
              f"{percentile(found, 0.99):.1f} ms, max {found[-1]:.1f} ms "
              f"({len(found) / sent:.0%} of {sent:,} received)", flush=True)


# -- unavailability --------------------------------------------------------------------------

def live(cluster: ClusterProcess) -> list[int]:
    return [n for n, node in enumerate(cluster.nodes, 1)
            if node.proc is not None and node.proc.poll() is None]


def live_bootstrap(cluster: ClusterProcess) -> str:
    return ",".join(cluster.nodes[n - 1].bootstrap for n in live(cluster))


def isr_whole(cluster: ClusterProcess, topic: str, rf: int, give_up_s: float) -> float | None:
    """Seconds until every replica of partition 0 is in the ISR again, or None."""
    def whole() -> bool:
        try:
            return len(describe_topic(live_bootstrap(cluster), topic)[0].isrs) == rf
        except Exception:  # a node still starting: ask again
            return False

    start = time.monotonic()
    return time.monotonic() - start if wait_for(whole, give_up_s) else None


def kill_round(cluster: ClusterProcess, topic: str, rf: int, producer: ContinuousProducer,
               consumer: TailingConsumer, give_up_s: float
               ) -> tuple[int, float | None, float | None]:
    """(node killed, seconds from the kill to the first acknowledgement and to the first read
    of a record produced after it — None if not within `give_up_s`)."""
    leader = leaders_of(live_bootstrap(cluster), topic)[0]
    if leader == active_controller(cluster, live(cluster)):
        print(f"  node {leader} leads the partition and the controller quorum")
    node = cluster.nodes[leader - 1]
    killed_at = time.monotonic()
    node.kill()
    first = producer.next_value  # every value from here on was produced after the kill
    producer.acks.watch(first)
    consumer.reads.watch(first)
    if rf == 1:
        node.start()  # the only replica: nothing is served until it is back
    acked_at = producer.acks.reached(first, give_up_s)
    read_at = consumer.reads.reached(first, give_up_s)
    return (leader, None if acked_at is None else acked_at - killed_at,
            None if read_at is None else read_at - killed_at)


def unavailability(cluster: ClusterProcess, args: argparse.Namespace) -> None:
    rf = 1 if args.rf1_only else 3
    topic = f"unavailability-rf{rf}"
    create(cluster.bootstrap, topic, 1, rf, **{"min.insync.replicas": min_insync(rf)})
    history = History()
    print(f"unavailability: RF {rf}, min.insync.replicas={min_insync(rf)}, idempotent acks=all "
          f"producer at {args.unavailability_rate:g} records/s, leader SIGKILLed "
          f"{args.rounds} times")
    with continuous_run(cluster.bootstrap, topic, history, 1, args.unavailability_rate,
                        flush_timeout_s=args.give_up) as (producer, consumer):
        producer.acks.watch(0)
        if producer.acks.reached(0, args.give_up) is None:
            print(f"  no record acknowledged within {args.give_up:g} s: no rounds")
            return
        for round_ in range(args.rounds):
            leader, acked, read = kill_round(cluster, topic, rf, producer, consumer,
                                             args.give_up)
            print(f"  round {round_ + 1}: SIGKILL of node {leader} (leader); first record "
                  f"produced after it acknowledged after {seconds(acked)}, read after "
                  f"{seconds(read)}", flush=True)
            if rf > 1:
                cluster.nodes[leader - 1].start()
                back = isr_whole(cluster, topic, rf, args.give_up)
                if back is None:
                    print(f"  node {leader} not back in the ISR within {args.give_up:g} s: "
                          f"no further rounds")
                    break
    final_read(history, live_bootstrap(cluster), topic, args.give_up)
    print("  " + str(history.check()).replace("\n", "\n  "))


def seconds(value: float | None) -> str:
    return "(not within the give-up time)" if value is None else f"{value:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_argument_group("parts (none given: all)")
    parts.add_argument("--throughput", action="store_true")
    parts.add_argument("--latency", action="store_true")
    parts.add_argument("--unavailability", action="store_true")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=3, help="of the throughput topics")
    parser.add_argument("--repeat", type=int, default=3, help="throughput rounds")
    parser.add_argument("--seconds", type=float, default=10.0, help="of paced latency records")
    parser.add_argument("--linger", type=lambda s: [int(x) for x in s.split(",")],
                        default=[0, 5], help="linger.ms values for latency, comma-separated")
    parser.add_argument("--fetch-wait-ms", type=int, default=0)
    parser.add_argument("--idempotent", action="store_true",
                        help="latency producer with enable.idempotence (5 requests in flight)")
    parser.add_argument("--rounds", type=int, default=5, help="leader kills")
    parser.add_argument("--unavailability-rate", type=float, default=1000.0)
    parser.add_argument("--give-up", type=float, default=60.0,
                        help="seconds to wait for acknowledgements before a part gives up")
    parser.add_argument("--rf1-only", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.repeat, args.seconds, args.rounds = 20_000, 1, 1.0, 1
        args.give_up = min(args.give_up, 20.0)
    chosen = [part for part in (throughput, latency, unavailability)
              if getattr(args, part.__name__)] or [throughput, latency, unavailability]
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as root:
        cluster = bench_cluster(Path(root))
        cluster.start()
        try:
            for part in chosen:
                part(cluster, args)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
