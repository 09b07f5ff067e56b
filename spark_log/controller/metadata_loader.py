"""The metadata loader (Kafka's MetadataLoader), on every node, controller or broker: it listens
to the quorum's committed batches and loaded snapshots, decodes the records of each batch,
replays them through a `MetadataDelta` and hands each new image, with the delta that made it, to
its publishers, in log order. A snapshot gives a whole new image (a snapshot delta).

The log holds only what an active controller validated, so a record that does not decode or
contradicts the image is fatal for the loader: one ERROR line naming the offset and the record,
and nothing is published after it (the node's image stays as it was before that batch).

Metadata transactions (KIP-868) are applied when their end is committed and dropped when
aborted (`metadata_transactions`). As Kafka's MetadataBatchLoader, the batches the quorum
commits together are replayed into one delta and published as one image, its provenance the
offset of the last record it holds and the epoch of that batch: a node starting on a long log
publishes its end state once rather than every state the log passed through (a broker would
otherwise take and drop each historical leadership in turn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from spark_log.deadline import within
from spark_log.metadata import (
    ImageError,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    Provenance,
    RecordDecodeError,
    decode_record,
)
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .metadata_snapshot import SnapshotError, snapshot_records
from .metadata_transactions import RecordRun, TransactionError, TransactionReader

__all__ = [
    "MetadataLoadError",
    "MetadataLoader",
    "Publisher",
    "QuorumSource",
    "decode_batch",
    "replay_run",
]

log = logging.getLogger(__name__)

Publisher = Callable[[MetadataDelta, MetadataImage], None]
_SHOWN_BYTES = 64


class MetadataLoadError(Exception):
    """A committed record the loader cannot apply: it does not decode, it contradicts the image,
    or a transaction marker is out of place; or a snapshot that does not read. `offset` is the
    record's (for a snapshot, its end offset)."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at offset {offset}: {message}")
        self.offset = offset


class QuorumSource(Protocol):
    """Where committed batches and snapshots come from (the `RaftDriver`)."""

    def on_commit(self, listener: Callable[[Sequence[Batch]], None]) -> None: ...

    def on_snapshot(self, listener: Callable[[OffsetAndEpoch, bytes], None]) -> None: ...


def decode_batch(batch: Batch, decode: Callable[[bytes], MetadataRecord] = decode_record
                 ) -> list[MetadataRecord]:
    """The metadata records of a (non-control) batch, each value read by `decode`;
    MetadataLoadError naming the offset and the bytes of the first record that does not
    decode."""
    records = []
    for index, value in enumerate(batch.records):
        try:
            records.append(decode(value))
        except RecordDecodeError as exc:
            shown = bytes(value[:_SHOWN_BYTES]).hex()
            more = "..." if len(value) > _SHOWN_BYTES else ""
            raise MetadataLoadError(batch.base_offset + index,
                                    f"the record {shown}{more} does not decode: {exc}") from None
    return records


def replay_run(delta: MetadataDelta, run: RecordRun) -> None:
    """Replay a run of records into `delta`; MetadataLoadError naming the record that
    contradicts the image (the delta then holds the records before it)."""
    for index, record in enumerate(run.records):
        try:
            delta.replay(record)
        except ImageError as exc:
            raise MetadataLoadError(run.base_offset + index, str(exc)) from None


class MetadataLoader:
    """The node's metadata image, as the committed log builds it.

        loader = MetadataLoader(driver, node_id=1)   # before driver.start()
        loader.add_publisher(lambda delta, image: ...)
        image = await loader.wait_for_offset(offset, timeout=5)

    Invariants: batches are applied once each, in offset order; `image` is the image after the
    last record applied (its provenance that record's offset and batch epoch) and `offset` the
    last offset applied, control batches included, never inside an open transaction; each
    publisher sees every image from the one it was added at on, in order, each with the delta
    from the image before it (the first: a snapshot delta of the whole image). After a
    MetadataLoadError (`error`) nothing changes any more. Not thread-safe: everything runs on
    the driver's event loop; a failing publisher is logged and the others still run.
    """

    def __init__(self, source: QuorumSource | None = None, *, node_id: int = -1,
                 decode: Callable[[Batch], list[MetadataRecord]] = decode_batch) -> None:
        self.node_id = node_id
        self._decode = decode  # a BatchDecoder shares the work with the node's controller
        self._image = MetadataImage.EMPTY
        self._delta = MetadataDelta(self._image)
        self._offset = -1
        self._transactions = TransactionReader()
        self._publishers: list[Publisher] = []
        self._waiters: list[tuple[int, asyncio.Future[MetadataImage]]] = []
        self._error: MetadataLoadError | None = None
        if source is not None:
            source.on_commit(self.handle_commit)
            source.on_snapshot(self.handle_snapshot)

    @property
    def image(self) -> MetadataImage:
        """The latest image."""
        return self._image

    @property
    def offset(self) -> int:
        """The last offset applied (-1: none)."""
        return self._offset

    @property
    def error(self) -> MetadataLoadError | None:
        """Why the loader stopped, if it did."""
        return self._error

    def add_publisher(self, publisher: Publisher) -> None:
        """Publish every later image to `publisher`; it gets the current one at once (with a
        snapshot delta holding the whole image) unless the image is still empty."""
        self._publishers.append(publisher)
        if self._image.provenance.offset >= 0:
            delta = MetadataDelta(MetadataImage.EMPTY, snapshot=True)
            delta.replay_image(self._image)
            self._call(publisher, delta, self._image)

    def remove_publisher(self, publisher: Publisher) -> None:
        if publisher in self._publishers:
            self._publishers.remove(publisher)

    async def wait_for_offset(self, offset: int, timeout: float | None = None) -> MetadataImage:
        """Until `offset` is applied; the image then. TimeoutError after `timeout` seconds;
        the loader's MetadataLoadError if it stopped."""
        if self._error is not None:
            raise self._error
        if self._offset >= offset:
            return self._image
        waiter: asyncio.Future[MetadataImage] = asyncio.get_running_loop().create_future()
        entry = (offset, waiter)
        self._waiters.append(entry)
        try:
            return await within(timeout, waiter)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    # ---- the quorum's news ------------------------------------------------------------------
    def handle_commit(self, batches: Sequence[Batch]) -> None:
        """Committed batches, in order (a commit listener of the driver), published as one
        image. A batch that cannot be applied is published without: the image is the one
        after the batch before it."""
        if self._error is not None:
            return
        loaded: list[RecordRun] = []  # the runs of the batches replayed whole
        last: Provenance | None = None
        for batch in batches:
            try:
                runs = self._load_batch(batch)
            except MetadataLoadError as exc:
                self._delta = MetadataDelta(self._image)  # without the failed batch's part
                for run in loaded:
                    replay_run(self._delta, run)
                if last is not None:
                    self._publish(last)
                self._fail(exc)
                return
            if runs:
                loaded.extend(runs)
                last = Provenance(runs[-1].last_offset, batch.epoch)
        if last is not None:
            self._publish(last)
        self._notify()

    def handle_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot to load (a snapshot listener of the driver): the whole image."""
        if self._error is not None:
            return
        try:
            records = snapshot_records(data)
        except SnapshotError as exc:
            self._fail(MetadataLoadError(snapshot_id.offset, f"snapshot {tuple(snapshot_id)} "
                                                             f"does not read: {exc}"))
            return
        delta = MetadataDelta(self._image, snapshot=True)
        try:
            replay_run(delta, RecordRun(0, tuple(records)))
        except MetadataLoadError as exc:
            self._fail(MetadataLoadError(snapshot_id.offset,
                                         f"snapshot {tuple(snapshot_id)}: {exc}"))
            return
        self._transactions.reset()
        self._delta = delta
        self._publish(Provenance(snapshot_id.offset - 1, snapshot_id.epoch))
        self._offset = snapshot_id.offset - 1
        self._notify()

    def _load_batch(self, batch: Batch) -> Sequence[RecordRun]:
        """Replay a batch into the pending delta; the runs of records it applied."""
        runs: Sequence[RecordRun] = ()
        if not batch.control:
            try:
                runs = self._transactions.read(batch.base_offset, self._decode(batch))
            except TransactionError as exc:
                raise MetadataLoadError(batch.base_offset, str(exc)) from None
            for run in runs:
                replay_run(self._delta, run)
            if runs:
                self._offset = runs[-1].last_offset
        if not self._transactions.open:
            self._offset = batch.last_offset
        return runs

    def _publish(self, provenance: Provenance) -> None:
        delta = self._delta
        image = delta.apply(provenance)
        self._image = image
        self._delta = MetadataDelta(image)
        for publisher in list(self._publishers):
            self._call(publisher, delta, image)

    def _call(self, publisher: Publisher, delta: MetadataDelta, image: MetadataImage) -> None:
        try:
            publisher(delta, image)
        except Exception:
            log.exception("Node %d: a metadata publisher failed on the image at offset %d",
                          self.node_id, image.provenance.offset)

    def _fail(self, error: MetadataLoadError) -> None:
        self._error = error
        log.error("Node %d: the metadata loader stopped %s; no image is published after "
                  "offset %d", self.node_id, error, self._image.provenance.offset)
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters.clear()

    def _notify(self) -> None:
        ready = [(o, w) for o, w in self._waiters if o <= self._offset]
        for entry in ready:
            self._waiters.remove(entry)
            if not entry[1].done():
                entry[1].set_result(self._image)
