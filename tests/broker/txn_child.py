"""Child processes for the transaction tests, killed with SIGKILL by the parent.

    python -m tests.broker.txn_child ctp BOOTSTRAP IN OUT PARTITIONS TXN_ID GROUP
        consume-transform-produce forever: read `IN` (read_committed, offsets from GROUP),
        write "out-<value>" to the same partition of `OUT` and the consumed offsets in one
        transaction per poll; prints "committed <n>" after each commit.
    python -m tests.broker.txn_child open BOOTSTRAP TOPIC TXN_ID COUNT TIMEOUT_MS
        begin a transaction, write COUNT records, flush, print "ready", then wait to be killed.
    python -m tests.broker.txn_child prepare BOOTSTRAP TOPIC TXN_ID COUNT TIMEOUT_MS
        the same, but exit after "ready", leaving the transaction open for another process.
"""

from __future__ import annotations

import sys
import threading

from confluent_kafka import Consumer, Producer, TopicPartition


def consume_transform_produce(bootstrap: str, source: str, sink: str, partitions: int,
                              transactional_id: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(source, p) for p in range(partitions)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 10_000, "linger.ms": 5})
    producer.init_transactions(60)
    print("ready", flush=True)
    while True:
        messages = [m for m in consumer.consume(2000, 0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, value=b"out-" + m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        print("committed", len(messages), flush=True)


def leave_open(bootstrap: str, topic: str, transactional_id: str, count: int,
               timeout_ms: int, wait: bool = True) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": timeout_ms})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=b"open-%d" % i)
    assert producer.flush(60) == 0
    print("ready", flush=True)
    if wait:
        threading.Event().wait()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "ctp":
        consume_transform_produce(args[0], args[1], args[2], int(args[3]), args[4], args[5])
    else:
        leave_open(args[0], args[1], args[2], int(args[3]), int(args[4]), mode == "open")
