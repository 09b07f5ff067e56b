"""The active controller's working image (what Kafka's controller keeps in its timeline data
structures): the committed image with every batch it appended and awaits committing replayed on
top. Decisions read `image`; `commit` moves the committed point up as the quorum commits
batches; `revert` drops what was not committed (on losing leadership, or when an append
failed). It also remembers at which offset each broker's RegisterBrokerRecord was replayed,
which a broker's metadata offset must reach before it is unfenced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from spark_log.metadata import (
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    Provenance,
)
from spark_log.metadata.records import RegisterBrokerRecord

__all__ = ["WorkingImage"]


@dataclass(frozen=True)
class _Batch:
    """A batch appended and not yet committed: its last offset and the state after it."""

    last_offset: int
    image: MetadataImage
    register_offsets: Mapping[int, int]


class WorkingImage:
    """The committed image and the uncommitted batches on top of it.

    Invariants: `committed` is the image as of the last committed batch; `image` is `committed`
    with every pending batch replayed in offset order (equal to `committed` when none is
    pending); pending batches have increasing offsets above `committed`'s. A batch that does not
    replay (ImageError) changes nothing. `register_offset(b)` is the offset of the last
    RegisterBrokerRecord of broker b replayed, or the offset of the snapshot the broker came in
    with (Kafka's rule for records loaded from a snapshot).
    """

    def __init__(self, committed: MetadataImage = MetadataImage.EMPTY) -> None:
        self._committed = committed
        offset = committed.provenance.offset
        self._committed_registers: Mapping[int, int] = MappingProxyType(
            {broker_id: offset for broker_id in committed.brokers})
        self._pending: list[_Batch] = []

    @property
    def committed(self) -> MetadataImage:
        return self._committed

    @property
    def image(self) -> MetadataImage:
        """The image decisions read: committed plus pending."""
        return self._pending[-1].image if self._pending else self._committed

    @property
    def pending_batches(self) -> int:
        return len(self._pending)

    def register_offset(self, broker_id: int) -> int | None:
        """The offset of the broker's last RegisterBrokerRecord, None if it is not registered."""
        return self.register_offsets().get(broker_id)

    def append(self, records: Iterable[MetadataRecord], base_offset: int,
               epoch: int) -> MetadataImage:
        """Replay a batch appended at `base_offset` in leader epoch `epoch`; the new image.
        Raises ImageError (nothing changes) if a record contradicts the image, ValueError if the
        batch does not lie above the last one."""
        records = tuple(records)
        if not records:
            return self.image
        if base_offset <= self.image.provenance.offset:
            raise ValueError(f"a batch at offset {base_offset} does not follow offset "
                             f"{self.image.provenance.offset}")
        delta = MetadataDelta(self.image)
        registers = dict(self.register_offsets())
        for index, record in enumerate(records):
            delta.replay(record)
            if isinstance(record, RegisterBrokerRecord):
                registers[record.broker_id] = base_offset + index
        for broker_id, broker in delta.changed_brokers.items():
            if broker is None:
                registers.pop(broker_id, None)
        last = base_offset + len(records) - 1
        image = delta.apply(Provenance(last, epoch))
        self._pending.append(_Batch(last, image, MappingProxyType(registers)))
        return image

    def register_offsets(self) -> Mapping[int, int]:
        """Each registered broker's register offset (see `register_offset`)."""
        return self._pending[-1].register_offsets if self._pending \
            else self._committed_registers

    def commit(self, high_watermark: int) -> MetadataImage:
        """Everything below `high_watermark` (the quorum's) is committed: pending batches that
        end below it become the committed image, which is returned."""
        while self._pending and self._pending[0].last_offset < high_watermark:
            batch = self._pending.pop(0)
            self._committed = batch.image
            self._committed_registers = batch.register_offsets
        return self._committed

    def replay_committed(self, records: Iterable[MetadataRecord], base_offset: int,
                         epoch: int) -> MetadataImage:
        """A batch already committed (a standby controller following the log)."""
        self.append(records, base_offset, epoch)
        return self.commit(self.image.provenance.offset + 1)

    def revert(self) -> MetadataImage:
        """Drop every batch not committed; the committed image."""
        self._pending.clear()
        return self._committed
