"""Idempotence and transaction benchmark against a real broker process; not a test.

Throughput: confluent-kafka producing small records with acks=all, plainly and with
enable.idempotence=true, in interleaved rounds against the same broker (best of N each); the
figure is the ratio idempotent / plain. librdkafka caps an idempotent producer at 5 requests
in flight, so a plain producer with max.in.flight=5 is measured too, and the broker's own
share is isolated by appending small batches (10 records) to a `PartitionLog` in process,
with and without a producer id.
Latency: a transactional producer running transactions of a few records; the time of
`commit_transaction()` (EndTxn: PrepareCommit, markers, CompleteCommit written) and of a whole
transaction (begin, produce, commit).

Usage, from the repository root:
    PYTHONPATH=. python bench/transactions.py [--records N] [--repeat N] [--transactions N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.records import Record, build_batch
from spark_log.storage import LogConfig, PartitionLog
from tests.broker_process import BrokerProcess

VALUE = b"x" * 100
APPEND_ROUNDS = 9  # interleaved, best of each: the in-process figure is the noisiest


def produce_rate(bootstrap: str, topic: str, records: int, idempotent: bool,
                 in_flight: int = 1_000_000) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": idempotent,
                         "max.in.flight": 5 if idempotent else in_flight})
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % 3)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - started)


def append_rate(batches: int, idempotent: bool) -> float:
    """Small-batch appends per second to a PartitionLog, with or without producer state."""
    now = time.time_ns() // 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog(tmp, "bench", 0, LogConfig.from_properties({}))
        payloads = [build_batch([Record(i, now, None, VALUE) for i in range(10)],
                                producer_id=7 if idempotent else -1,
                                producer_epoch=0 if idempotent else -1,
                                base_sequence=10 * n if idempotent else -1)
                    for n in range(batches)]
        started = time.perf_counter()
        for payload in payloads:
            log.append(payload, leader_epoch=0)
        elapsed = time.perf_counter() - started
        log.close()
    return batches / elapsed


def commit_latencies(bootstrap: str, topic: str, transactions: int
                     ) -> tuple[list[float], list[float]]:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench",
                         "linger.ms": 0})
    producer.init_transactions(30)
    commits, totals = [], []
    for _ in range(transactions):
        started = time.perf_counter()
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=VALUE, partition=i % 3)
        before_commit = time.perf_counter()
        producer.commit_transaction(30)
        done = time.perf_counter()
        commits.append((done - before_commit) * 1000)
        totals.append((done - started) * 1000)
    return commits, totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", Path(tmp) / "broker.log", {
            "transaction.state.log.num.partitions": "4"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            futures = admin.create_topics([NewTopic(t, 3, 1) for t in ("plain", "idem", "txn")])
            for future in futures.values():
                future.result(30)
            plain, plain5, idem = [], [], []
            for _ in range(args.repeat):
                plain.append(produce_rate(broker.bootstrap, "plain", args.records, False))
                plain5.append(produce_rate(broker.bootstrap, "plain", args.records, False, 5))
                idem.append(produce_rate(broker.bootstrap, "idem", args.records, True))
            commits, totals = commit_latencies(broker.bootstrap, "txn", args.transactions)
        finally:
            broker.stop()
    appends = [(append_rate(20_000, False), append_rate(20_000, True))
               for _ in range(APPEND_ROUNDS)]
    best_plain, best_idem = max(a[0] for a in appends), max(a[1] for a in appends)
    print(f"plain acks=all:    {max(plain):>10,.0f} records/s (best of {args.repeat})")
    print(f"plain, 5 in flight:{max(plain5):>10,.0f} records/s")
    print(f"idempotent:        {max(idem):>10,.0f} records/s")
    print(f"ratio idempotent / plain: {max(idem) / max(plain):.2f}, "
          f"/ plain with 5 in flight: {max(idem) / max(plain5):.2f}")
    print(f"PartitionLog.append of 10-record batches: plain {best_plain:,.0f}/s, "
          f"idempotent {best_idem:,.0f}/s, ratio {best_idem / best_plain:.2f}")
    for name, values in (("commit_transaction", commits), ("whole transaction", totals)):
        q = statistics.quantiles(values, n=10)
        print(f"{name:<19}median {statistics.median(values):6.2f} ms, p90 {q[-1]:6.2f} ms")


if __name__ == "__main__":
    main()
