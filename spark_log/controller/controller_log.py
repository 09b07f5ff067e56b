"""The controller's view of the metadata log (what Kafka's QuorumController keeps in its
SnapshotRegistry and OffsetControlManager): the working image fed by the quorum's committed
batches and snapshots, and by the batches this node proposes while it leads.

A committed batch is either one this node proposed in the same epoch at the same offset (its
records are already in the working image: they become committed) or another's: it is decoded
and replayed, metadata transactions taking effect at their end (`metadata_transactions`).
Another's batch committed where this node still has batches pending means they were lost:
they are dropped first. The log holds only what an active controller validated, so a record
that does not decode or replay stops the replay for good (`error`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spark_log.metadata import ImageError, MetadataImage, MetadataRecord, encode_record
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .feature_control import IBP_3_6_IV2, record_version
from .metadata_loader import MetadataLoadError, decode_batch
from .metadata_snapshot import SnapshotError, read_snapshot
from .metadata_transactions import TransactionError, TransactionReader
from .working_image import WorkingImage

__all__ = ["ControllerLog"]


class ControllerLog:
    """Invariants: `working.committed` is the image of every committed batch replayed (never
    inside an open transaction); `working.image` adds the batches proposed and not yet
    committed, whose (base offset, epoch) `proposals` holds in offset order; after `error` is
    set nothing more is replayed. Not thread-safe."""

    def __init__(self, decode: Callable[[Batch], list[MetadataRecord]] = decode_batch) -> None:
        self._decode = decode  # a BatchDecoder shares the work with the node's broker
        self.working = WorkingImage()
        self.transactions = TransactionReader()
        self.proposals: dict[int, int] = {}  # base offset -> epoch proposed in
        self.error: MetadataLoadError | None = None

    @property
    def committed(self) -> MetadataImage:
        return self.working.committed

    @property
    def last_proposed(self) -> int | None:
        """The base offset of the last batch proposed and not yet committed."""
        return next(reversed(self.proposals), None)

    def encode(self, records: Sequence[MetadataRecord]) -> list[bytes]:
        """The records' bytes at the versions Kafka writes them at the image's metadata.version
        (RecordEncodeError for a record that does not encode)."""
        version = self.working.image.metadata_version or IBP_3_6_IV2
        return [encode_record(record, record_version(record, version)) for record in records]

    def append(self, records: Sequence[MetadataRecord], base_offset: int, epoch: int) -> None:
        """Records proposed as one batch at `base_offset` in `epoch` (before the proposal, so
        that a commit delivered at once finds them)."""
        self.working.append(records, base_offset, epoch)
        self.proposals[base_offset] = epoch

    def revert(self) -> None:
        """Every batch not committed is lost."""
        self.working.revert()
        self.proposals.clear()

    def committed_batches(self, batches: Sequence[Batch]) -> list[int]:
        """Committed batches, in order; the epochs of the control batches among them."""
        control_epochs = []
        for batch in batches:
            if self.error is not None:
                break
            if batch.control:
                control_epochs.append(batch.epoch)
                continue
            try:
                self._committed(batch)
            except MetadataLoadError as exc:
                self.error = exc
        return control_epochs

    def _committed(self, batch: Batch) -> None:
        records = self._decode(batch)
        try:
            runs = self.transactions.read(batch.base_offset, records)
        except TransactionError as exc:
            raise MetadataLoadError(batch.base_offset, str(exc)) from None
        if self.proposals.get(batch.base_offset) == batch.epoch:
            del self.proposals[batch.base_offset]
            self.working.commit(batch.next_offset)
            return
        if self.proposals:
            self.revert()
        for run in runs:
            try:
                self.working.replay_committed(run.records, run.base_offset, batch.epoch)
            except (ImageError, ValueError) as exc:
                raise MetadataLoadError(run.base_offset, str(exc)) from None

    def load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot replaces everything, pending batches included."""
        if self.error is not None:
            return
        try:
            image = read_snapshot(data, snapshot_id.offset, snapshot_id.epoch)
        except (SnapshotError, ImageError) as exc:
            self.error = MetadataLoadError(snapshot_id.offset,
                                           f"snapshot {tuple(snapshot_id)} does not read: {exc}")
            return
        self.working = WorkingImage(image)
        self.transactions.reset()
        self.proposals.clear()
