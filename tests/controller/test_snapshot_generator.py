"""The snapshot generator: on a real lone voter, a snapshot after the configured bytes that the
next start loads; against a recording sink, batch boundaries whichever listener hears first,
an open transaction, the time limit, a loaded snapshot restarting the count."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from spark_log.controller import snapshot_generator
from spark_log.controller.metadata_snapshot import read_snapshot, write_snapshot
from spark_log.controller.snapshot_generator import SnapshotGenerator
from spark_log.metadata import MetadataDelta, MetadataImage, Provenance, replay_records
from spark_log.metadata.records import FeatureLevelRecord, PartitionRecord, TopicRecord
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .controller_harness import FakeClock, LoneController, create_topics, unfenced_broker
from .support import eventually


class Sink:
    """Records the listeners and the snapshots taken."""

    def __init__(self) -> None:
        self.commit: list[Callable[[Sequence[Batch]], None]] = []
        self.snapshot: list[Callable[[OffsetAndEpoch, bytes], None]] = []
        self.taken: list[tuple[OffsetAndEpoch, bytes]] = []
        self.threads: list[int] = []  # the thread each snapshot was handed over on

    def on_commit(self, listener: Callable[[Sequence[Batch]], None]) -> None:
        self.commit.append(listener)

    def on_snapshot(self, listener: Callable[[OffsetAndEpoch, bytes], None]) -> None:
        self.snapshot.append(listener)

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.taken.append((snapshot_id, data))
        self.threads.append(threading.get_ident())


def image_at(offset: int, topics: int = 1) -> MetadataImage:
    records = [FeatureLevelRecord(name="metadata.version", feature_level=14)]
    records += [TopicRecord(name=f"t{i}", topic_id=uuid.UUID(int=i + 7))
                for i in range(topics)]
    return replay_records(MetadataImage.EMPTY, records, Provenance(offset, 3))


def batch(base: int, size: int, count: int = 1) -> Batch:
    return Batch(base, 3, tuple(b"x" * (size - 16) for _ in range(count)))


def generator(sink: Sink, clock: FakeClock, max_bytes: int = 100,
              interval_ms: int = 0) -> SnapshotGenerator:
    return SnapshotGenerator(sink, max_record_bytes=max_bytes, max_interval_ms=interval_ms,
                             clock_ms=clock, node_id=4)


def publish(g: SnapshotGenerator, image: MetadataImage) -> None:
    g.publish(MetadataDelta(image), image)


def test_a_snapshot_is_due_after_the_bytes_whichever_listener_hears_first() -> None:
    clock, sink = FakeClock(), Sink()
    g = generator(sink, clock)
    sink.commit[0]([batch(0, 60)])
    publish(g, image_at(0))
    assert sink.taken == []  # 60 bytes of 100
    publish(g, image_at(1))  # the loader first: the batch is not heard of yet
    assert sink.taken == []
    sink.commit[0]([batch(1, 60)])
    assert [s for s, _ in sink.taken] == [OffsetAndEpoch(2, 3)]
    assert read_snapshot(sink.taken[0][1], 2, 3) == image_at(1)
    sink.commit[0]([batch(2, 200, count=2)])
    publish(g, image_at(2))  # inside that batch (a transaction open at its end): not yet
    assert len(sink.taken) == 1
    publish(g, image_at(3))
    assert [s for s, _ in sink.taken][-1] == OffsetAndEpoch(4, 3)


def test_the_time_limit_and_a_loaded_snapshot(caplog: pytest.LogCaptureFixture) -> None:
    clock, sink = FakeClock(), Sink()
    g = generator(sink, clock, max_bytes=1 << 20, interval_ms=60_000)
    sink.commit[0]([batch(0, 20)])
    publish(g, image_at(0))
    assert sink.taken == []
    clock.now += 60_000
    sink.snapshot[0](OffsetAndEpoch(5, 3), b"")  # loaded: the count starts again
    assert g.last_snapshot_end == 5
    sink.commit[0]([batch(5, 20)])
    publish(g, image_at(5))
    assert sink.taken == []
    clock.now += 60_000
    sink.commit[0]([batch(6, 20)])
    with caplog.at_level(logging.INFO, logger="spark_log.controller"):
        publish(g, image_at(6))
    assert [s for s, _ in sink.taken] == [OffsetAndEpoch(7, 3)]
    assert [r.getMessage() for r in caplog.records] == [
        "Node 4: creating new KRaft snapshot file 00000000000000000007-0000000003 because we "
        "have waited at least 1 minute(s)."]


def test_an_empty_image_is_never_snapshotted() -> None:
    clock, sink = FakeClock(), Sink()
    g = generator(sink, clock, max_bytes=1)
    sink.commit[0]([batch(0, 20)])
    empty = MetadataImage(provenance=Provenance(0, 3))
    g.publish(MetadataDelta(empty), empty)
    assert sink.taken == []


def image_of_partitions(offset: int, partitions: int) -> MetadataImage:
    """An image whose snapshot takes a while to encode: `partitions` partitions of 3 replicas."""
    records: list[object] = [FeatureLevelRecord(name="metadata.version", feature_level=14)]
    for t in range(partitions // 100):
        topic_id = uuid.UUID(int=t + 1)
        records.append(TopicRecord(name=f"t{t}", topic_id=topic_id))
        records += [PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2, 3),
                                    isr=(1, 2, 3), leader=1 + p % 3, leader_epoch=0,
                                    partition_epoch=0) for p in range(100)]
    return replay_records(MetadataImage.EMPTY, records, Provenance(offset, 3))


def test_on_a_running_loop_the_snapshot_is_encoded_on_another_thread_while_the_loop_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoding runs on the writer's thread, so callbacks queued behind the publish run
    before the snapshot is taken; it reaches the quorum back on the loop's thread."""
    image = image_of_partitions(0, 3000)
    encoded_on: list[int] = []

    def spied(*args: object, **kwargs: object) -> bytes:
        encoded_on.append(threading.get_ident())
        return write_snapshot(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot_generator, "write_snapshot", spied)

    async def scenario() -> None:
        clock, sink = FakeClock(), Sink()
        g = generator(sink, clock, max_bytes=1)
        sink.commit[0]([batch(0, 20)])
        publish(g, image)
        seen: list[int] = []
        asyncio.get_running_loop().call_soon(lambda: seen.append(len(sink.taken)))
        await eventually(lambda: sink.taken, 30, "the snapshot")
        assert seen == [0]  # the loop went on before the snapshot was taken
        assert [s for s, _ in sink.taken] == [OffsetAndEpoch(1, 3)]
        assert sink.threads == [threading.get_ident()]
        assert len(encoded_on) == 1 and encoded_on[0] != threading.get_ident()
        assert read_snapshot(sink.taken[0][1], 1, 3) == image
        g.close()

    asyncio.run(scenario())


def test_a_snapshot_due_while_one_is_written_waits_for_the_next_boundary() -> None:
    async def scenario() -> None:
        clock, sink = FakeClock(), Sink()
        g = generator(sink, clock, max_bytes=1)
        sink.commit[0]([batch(0, 20)])
        publish(g, image_of_partitions(0, 1000))
        sink.commit[0]([batch(1, 20)])
        publish(g, image_at(1))  # due, but the first one is still being written
        await eventually(lambda: sink.taken, 30, "the first snapshot")
        assert [s for s, _ in sink.taken] == [OffsetAndEpoch(1, 3)]
        sink.commit[0]([batch(2, 20)])
        publish(g, image_at(2))
        await eventually(lambda: len(sink.taken) == 2, 30, "the second snapshot")
        assert [s for s, _ in sink.taken] == [OffsetAndEpoch(1, 3), OffsetAndEpoch(3, 3)]
        g.close()
    asyncio.run(scenario())


def test_a_snapshot_loaded_while_one_is_written_wins(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        clock, sink = FakeClock(), Sink()
        g = generator(sink, clock, max_bytes=1)
        sink.commit[0]([batch(0, 20)])
        publish(g, image_of_partitions(0, 1000))
        sink.snapshot[0](OffsetAndEpoch(1, 3), b"")  # the leader's, as recent, loaded
        await eventually(lambda: "not taken" in caplog.text, 30, "the write to end")
        assert sink.taken == [] and g.last_snapshot_end == 1
        g.close()
    with caplog.at_level(logging.INFO, logger="spark_log.controller"):
        asyncio.run(scenario())


def test_a_snapshot_that_fails_to_encode_is_logged_and_the_next_one_is_taken(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise MemoryError("no room to encode")

    async def scenario() -> None:
        clock, sink = FakeClock(), Sink()
        g = generator(sink, clock, max_bytes=1)
        monkeypatch.setattr(snapshot_generator, "write_snapshot", broken)
        sink.commit[0]([batch(0, 20)])
        publish(g, image_at(0))
        await eventually(lambda: "could not be written" in caplog.text, 30, "the error")
        monkeypatch.setattr(snapshot_generator, "write_snapshot", write_snapshot)
        sink.commit[0]([batch(1, 20)])
        publish(g, image_at(1))
        await eventually(lambda: sink.taken, 30, "the next snapshot")
        assert [s for s, _ in sink.taken] == [OffsetAndEpoch(2, 3)]
        g.close()
    with caplog.at_level(logging.INFO, logger="spark_log.controller"):
        asyncio.run(scenario())
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failed) == 1 and "no room to encode" in str(failed[0].exc_info[1])


def test_a_snapshot_after_the_configured_bytes_is_loaded_at_the_next_start(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        node = LoneController(tmp_path)
        g = SnapshotGenerator(node.driver, max_record_bytes=2000, max_interval_ms=0,
                              node_id=1)
        node.loader.add_publisher(g.publish)
        controller = await node.start()
        await unfenced_broker(controller, 1)
        for i in range(100):  # bounded: each topic is a few hundred bytes
            await controller.handle(create_topics(f"topic-{i}", partitions=2))
            if g.last_snapshot_end:
                break
        await eventually(lambda: node.driver.replica.log.start_offset > 0, 5,
                         "the snapshot to be taken")
        snapshots = list((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))
        assert [p.name for p in snapshots] == [f"{g.last_snapshot_end:020d}-{1:010d}.checkpoint"]
        await controller.handle(create_topics("after-the-snapshot"))
        before = node.loader.image
        await node.close()
        again = LoneController(tmp_path)
        loaded: list[MetadataDelta] = []
        again.loader.add_publisher(lambda delta, image: loaded.append(delta))
        controller = await again.start()
        assert loaded[0].snapshot and loaded[0].apply(Provenance(0, 0)).topic("topic-0")
        assert again.loader.image == before and controller.image == before
        await again.close()
    asyncio.run(scenario())
