"""How fast a node applies committed metadata: the MetadataLoader turning committed batches into
images, against decoding the same records alone in the same run (the part no apply can skip).

The cluster holds `--partitions` partitions (replication factor 3 over 3 brokers); the records
applied are PartitionChangeRecords moving leaders round the replicas — what a failover or a
controlled shutdown writes — in batches of 1 (one change at a time), 100 and 1,000 (a broker
leaving moves its leaderships in one batch), each batch committed on its own, so each publishes
a new image; and all batches of 1 committed together, as a node starting on a long log gets
them (one image for the lot).

Usage: python bench/metadata_apply.py [--partitions 1000] [--changes 20000] [--repeat 3]
Prints records/s applied, records/s decoded, and their ratio, per batch size.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_log.controller.metadata_loader import MetadataLoader, decode_batch
from spark_log.metadata import encode_record
from spark_log.metadata.records import (
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from spark_log.raft.messages import Batch

TOPIC_PARTITIONS = 100
BROKERS = (1, 2, 3)


def cluster_records(partitions: int) -> list[bytes]:
    """The records of a cluster of 3 brokers and `partitions` partitions, 100 per topic."""
    records: list[object] = [FeatureLevelRecord(name="metadata.version", feature_level=14)]
    records += [RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.uuid4(),
                                         broker_epoch=b, fenced=False) for b in BROKERS]
    for t in range((partitions + TOPIC_PARTITIONS - 1) // TOPIC_PARTITIONS):
        topic_id = uuid.uuid4()
        records.append(TopicRecord(name=f"topic-{t}", topic_id=topic_id))
        for p in range(min(TOPIC_PARTITIONS, partitions - t * TOPIC_PARTITIONS)):
            replicas = tuple(BROKERS[(p + i) % 3] for i in range(3))
            records.append(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas,
                                           isr=replicas, leader=replicas[0], leader_epoch=0,
                                           partition_epoch=0))
    return [encode_record(r) for r in records]  # type: ignore[arg-type]


def change_records(loader: MetadataLoader, count: int) -> list[bytes]:
    """`count` leader changes, round the partitions, each to the partition's next replica."""
    partitions = [(topic.id, p, reg.replicas) for topic in loader.image.topics.values()
                  for p, reg in sorted(topic.partitions.items())]
    records = []
    for i in range(count):
        topic_id, p, replicas = partitions[i % len(partitions)]
        turn = i // len(partitions) + 1
        records.append(encode_record(PartitionChangeRecord(
            partition_id=p, topic_id=topic_id, leader=replicas[turn % len(replicas)])))
    return records


def batches(records: list[bytes], size: int, base: int, epoch: int = 1) -> list[Batch]:
    return [Batch(base + i, epoch, tuple(records[i:i + size]))
            for i in range(0, len(records), size)]


def loaded(partitions: int) -> tuple[MetadataLoader, int]:
    loader = MetadataLoader(node_id=1)
    setup = cluster_records(partitions)
    loader.handle_commit([Batch(0, 1, tuple(setup))])
    assert loader.error is None, loader.error
    return loader, len(setup)


def apply_rate(partitions: int, changes: int, size: int, together: bool = False) -> float:
    loader, base = loaded(partitions)
    work = batches(change_records(loader, changes), size, base)
    start = time.perf_counter()
    if together:
        loader.handle_commit(work)
    else:
        for batch in work:
            loader.handle_commit([batch])
    elapsed = time.perf_counter() - start
    assert loader.error is None and loader.offset == base + changes - 1, loader.error
    return changes / elapsed


def decode_rate(partitions: int, changes: int, size: int) -> float:
    loader, base = loaded(partitions)
    work = batches(change_records(loader, changes), size, base)
    start = time.perf_counter()
    decoded = sum(len(decode_batch(b)) for b in work)
    elapsed = time.perf_counter() - start
    assert decoded == changes
    return changes / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.partitions} partitions, {args.changes} leader changes, best of {args.repeat}")
    for size in (1, 100, 1000):
        applied = max(apply_rate(args.partitions, args.changes, size)
                      for _ in range(args.repeat))
        decoded = max(decode_rate(args.partitions, args.changes, size)
                      for _ in range(args.repeat))
        print(f"batch of {size:>5}: applied {applied:>10,.0f} records/s   decoded "
              f"{decoded:>10,.0f} records/s   applied/decoded {applied / decoded:.2f}")
    together = max(apply_rate(args.partitions, args.changes, 1, together=True)
                   for _ in range(args.repeat))
    decoded = max(decode_rate(args.partitions, args.changes, 1) for _ in range(args.repeat))
    print(f"batches of 1 committed together: applied {together:>10,.0f} records/s   decoded "
          f"{decoded:>10,.0f} records/s   applied/decoded {together / decoded:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
