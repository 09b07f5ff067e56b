"""Metadata snapshots taken as the log grows (Kafka's SnapshotGenerator and SnapshotEmitter), on
every node, controller or broker: a publisher of the node's `MetadataLoader` that counts the
bytes of the committed batches replayed and, when `SnapshotSchedule` says one is due
(`metadata.log.max.record.bytes.between.snapshots` replayed, or
`metadata.log.max.snapshot.interval.ms` passed), writes the published image in Kafka's format
(`metadata_snapshot.write_snapshot`) and hands it to the quorum (`RaftDriver.take_snapshot`),
which stores it and drops the log below it. Each snapshot is announced with one INFO line
giving its name and why it was taken.

A snapshot is taken only of an image at a batch boundary (raft snapshots only there: not while
a metadata transaction is open at the end of a batch), never of an empty image, never at or
below the last snapshot. As Kafka's emitter does, it is encoded off the request path: on a
thread of its own (images are immutable, so the loop publishing later ones does not disturb it),
then handed to the quorum back on the event loop. The loop keeps serving meanwhile; it would
otherwise stall for the whole encoding, about half a second for 10,000 partitions. One snapshot
is written at a time: one falling due meanwhile waits for the next batch boundary after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from spark_log.clock import SYSTEM_CLOCK
from spark_log.metadata import MetadataDelta, MetadataImage
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .metadata_snapshot import SnapshotSchedule, snapshot_id, write_snapshot
from .quorum_errors import DriverStoppedError

__all__ = ["SnapshotGenerator", "SnapshotSink", "snapshot_name"]

log = logging.getLogger(__name__)


class SnapshotSink(Protocol):
    """Where batches come from and snapshots go (the `RaftDriver`)."""

    def on_commit(self, listener: Callable[[Sequence[Batch]], None]) -> None: ...

    def on_snapshot(self, listener: Callable[[OffsetAndEpoch, bytes], None]) -> None: ...

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...


def snapshot_name(snapshot: OffsetAndEpoch) -> str:
    """Kafka's name of a snapshot: <20-digit end offset>-<10-digit epoch>."""
    return f"{snapshot.offset:020d}-{snapshot.epoch:010d}"


class SnapshotGenerator:
    """Add it to the node's loader, constructed before the driver starts:

        generator = SnapshotGenerator(driver, max_record_bytes=..., max_interval_ms=...)
        loader.add_publisher(generator.publish)

    Invariants: each committed batch's bytes are counted once, when an image at or past its
    end is published (whichever of the loader and this generator hears of a batch first);
    the schedule restarts when a snapshot is taken or loaded; snapshots are taken at increasing
    offsets; at most one snapshot is being written. Not thread-safe: everything but the
    encoding runs on the driver's event loop.
    """

    def __init__(self, driver: SnapshotSink, *, max_record_bytes: int, max_interval_ms: int,
                 clock_ms: Callable[[], int] = SYSTEM_CLOCK.now_ms, node_id: int = -1) -> None:
        self._driver, self._clock_ms, self.node_id = driver, clock_ms, node_id
        self._schedule = SnapshotSchedule(max_record_bytes, max_interval_ms, clock_ms())
        self._batches: deque[tuple[int, int]] = deque()  # (last offset, bytes) not counted
        self._latest: MetadataImage | None = None  # published, its batches not all seen
        self._last_end = 0  # end offset of the last snapshot taken or loaded
        self._writing: OffsetAndEpoch | None = None  # the snapshot being encoded
        self._writer: ThreadPoolExecutor | None = None  # started with the first snapshot
        driver.on_commit(self._on_commit)
        driver.on_snapshot(self._on_snapshot)

    def close(self) -> None:
        """Stop the writer's thread; a snapshot being written is dropped (the log keeps
        everything it would have held)."""
        if self._writer is not None:
            self._writer.shutdown(wait=False, cancel_futures=True)

    @property
    def last_snapshot_end(self) -> int:
        """The end offset of the last snapshot taken or loaded (0: none)."""
        return self._last_end

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """A new image (a loader publisher)."""
        self._latest = image
        self._account()

    def _on_commit(self, batches: Sequence[Batch]) -> None:
        self._batches.extend((batch.last_offset, batch.size()) for batch in batches)
        self._account()

    def _on_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self._batches.clear()
        self._latest = None
        self._last_end = max(self._last_end, snapshot.offset)
        self._schedule.reset(self._clock_ms())

    def _account(self) -> None:
        """Count the batches the latest image holds; at a batch boundary, maybe snapshot."""
        image = self._latest
        if image is None:
            return
        offset = image.provenance.offset
        boundary = False
        while self._batches and self._batches[0][0] <= offset:
            last_offset, size = self._batches.popleft()
            self._schedule.replayed(size)
            boundary = last_offset == offset
        if not boundary:
            return  # inside a batch (a transaction open), or its batch not heard of yet
        self._latest = None
        reason = self._schedule.due(self._clock_ms())
        if reason is None:
            return
        if offset < 0 or image.is_empty:
            log.debug("Node %d: not snapshotting an empty image", self.node_id)
            return
        if offset + 1 <= self._last_end or self._writing is not None:
            return
        self._schedule.reset(self._clock_ms())
        snapshot = OffsetAndEpoch(*snapshot_id(image))
        log.info("Node %d: creating new KRaft snapshot file %s because %s.", self.node_id,
                 snapshot_name(snapshot), reason)
        now = self._clock_ms()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: write it now
            self._take(snapshot, write_snapshot(image, now_ms=now, last_contained_log_time_ms=now))
            return
        if self._writer is None:
            self._writer = ThreadPoolExecutor(
                1, thread_name_prefix=f"snapshot-writer-{self.node_id}")
        self._writing = snapshot
        written = self._writer.submit(write_snapshot, image, now_ms=now,
                                      last_contained_log_time_ms=now)
        written.add_done_callback(lambda done: self._back_on(loop, snapshot, done))

    def _back_on(self, loop: asyncio.AbstractEventLoop, snapshot: OffsetAndEpoch,
                 done: Future[bytes]) -> None:
        """(On the writer's thread.) Return to the loop, unless the node has stopped."""
        try:
            loop.call_soon_threadsafe(self._written, snapshot, done)
        except RuntimeError:  # the loop is closed
            log.info("Node %d: snapshot %s not taken: the node stopped", self.node_id,
                     snapshot_name(snapshot))

    def _written(self, snapshot: OffsetAndEpoch, done: Future[bytes]) -> None:
        """Back on the loop: hand the encoded snapshot to the quorum."""
        self._writing = None
        if done.cancelled():  # closed before it started
            return
        error = done.exception()
        if error is not None:
            log.error("Node %d: snapshot %s could not be written", self.node_id,
                      snapshot_name(snapshot), exc_info=error)
            return
        if self._last_end >= snapshot.offset:
            log.info("Node %d: snapshot %s not taken: one as recent was loaded meanwhile",
                     self.node_id, snapshot_name(snapshot))
            return
        self._take(snapshot, done.result())

    def _take(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self._last_end = snapshot.offset
        try:
            self._driver.take_snapshot(snapshot, data)
        except (ValueError, DriverStoppedError) as exc:
            log.warning("Node %d: snapshot %s was not taken: %s", self.node_id,
                        snapshot_name(snapshot), exc)
