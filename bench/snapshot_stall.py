"""How long the event loop stalls while a node writes a metadata snapshot of a large image.

The image holds `--partitions` partitions (3 replicas each). On a running asyncio loop a ticker
wakes every millisecond and records how late each wake-up is, while a snapshot of the image is
written two ways in the same run:

* on the loop (the baseline): `write_snapshot` called in a loop callback, as the snapshot
  generator did before it had a writer thread;
* through `SnapshotGenerator`, which encodes on its own thread and hands the bytes to the
  quorum back on the loop.

Prints, per way, the write's wall time, the ticker's longest stall and its p99 lateness, and the
ratio of the generator's longest stall to the baseline's.

Usage: python bench/snapshot_stall.py [--partitions 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_log.controller.metadata_snapshot import write_snapshot
from spark_log.controller.snapshot_generator import SnapshotGenerator
from spark_log.metadata import MetadataDelta, MetadataImage, Provenance, replay_records
from spark_log.metadata.records import FeatureLevelRecord, PartitionRecord, TopicRecord
from spark_log.raft.messages import Batch, OffsetAndEpoch

TICK_S = 0.001


class Sink:
    """The quorum's side of the generator: it only notes when the snapshot arrives."""

    def __init__(self) -> None:
        self.commit: list[Callable[[Sequence[Batch]], None]] = []
        self.taken = asyncio.Event()

    def on_commit(self, listener: Callable[[Sequence[Batch]], None]) -> None:
        self.commit.append(listener)

    def on_snapshot(self, listener: Callable[[OffsetAndEpoch, bytes], None]) -> None:
        pass

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.taken.set()


def image_of(partitions: int) -> MetadataImage:
    records: list[object] = [FeatureLevelRecord(name="metadata.version", feature_level=14)]
    for t in range((partitions + 99) // 100):
        topic_id = uuid.UUID(int=t + 1)
        records.append(TopicRecord(name=f"topic-{t:04d}", topic_id=topic_id))
        records += [PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2, 3),
                                    isr=(1, 2, 3), leader=1 + p % 3, leader_epoch=0,
                                    partition_epoch=0)
                    for p in range(min(100, partitions - 100 * t))]
    return replay_records(MetadataImage.EMPTY, records, Provenance(len(records) - 1, 1))


async def ticker(stop: asyncio.Event, lateness: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + TICK_S
        await asyncio.sleep(TICK_S)
        lateness.append(loop.time() - due)


async def measure(write: Callable[[asyncio.Event], None]) -> tuple[float, list[float]]:
    """(seconds until the snapshot is handed over, the ticker's lateness meanwhile)."""
    stop, done, lateness = asyncio.Event(), asyncio.Event(), []
    task = asyncio.create_task(ticker(stop, lateness))
    await asyncio.sleep(0.05)  # the ticker running
    lateness.clear()
    started = time.perf_counter()
    write(done)
    await done.wait()
    took = time.perf_counter() - started
    stop.set()
    await task
    return took, lateness


def on_the_loop(image: MetadataImage) -> Callable[[asyncio.Event], None]:
    def write(done: asyncio.Event) -> None:
        def callback() -> None:
            write_snapshot(image, now_ms=0, last_contained_log_time_ms=0)
            done.set()
        asyncio.get_running_loop().call_soon(callback)
    return write


def through_the_generator(image: MetadataImage) -> Callable[[asyncio.Event], None]:
    def write(done: asyncio.Event) -> None:
        sink = Sink()
        sink.taken = done
        generator = SnapshotGenerator(sink, max_record_bytes=1, max_interval_ms=0)
        offset = image.provenance.offset
        sink.commit[0]([Batch(offset, 1, (b"x",))])
        generator.publish(MetadataDelta(image), image)
    return write


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    image = image_of(args.partitions)
    print(f"image of {args.partitions} partitions")
    for round_ in range(1, args.repeat + 1):
        results = {}
        for name, way in (("on the loop", on_the_loop), ("generator", through_the_generator)):
            took, lateness = asyncio.run(measure(way(image)))
            results[name] = max(lateness, default=0.0)
            print(f"  round {round_} {name:12s} written in {took * 1000:7.1f} ms; ticker: "
                  f"longest stall {max(lateness, default=0) * 1000:7.1f} ms, p99 lateness "
                  f"{p99(lateness) * 1000:6.2f} ms over {len(lateness)} ticks")
        print(f"  round {round_} longest stall, generator / on the loop: "
              f"{results['generator'] / results['on the loop']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
