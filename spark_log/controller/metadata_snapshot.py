"""Metadata snapshots in Kafka's format (RecordsSnapshotWriter, RaftSnapshotWriter and
SnapshotGenerator): the contents of a snapshot of an image, reading one back, and when to take
one.

A snapshot is RecordBatches v2 numbered from offset 0 with the snapshot's epoch as partition
leader epoch: a control batch holding the SnapshotHeaderRecord (control type 3), the image's
records (`MetadataImage.to_records()`) in batches of 1024, each record's value the metadata
record at the version Kafka writes it (`feature_control.record_version`), and a control batch
holding the SnapshotFooterRecord (type 4). A snapshot of an image whose last record is at offset
n in epoch e is named (n + 1, e); its bytes go to the raft replica and the snapshot files as
they are. Reading skips KRaft's own control records (kraft.version, voters) Kafka may put after
the header.

When: once the records replayed since the last snapshot reach
`metadata.log.max.record.bytes.between.snapshots`, or `metadata.log.max.snapshot.interval.ms`
after it (0: never by time), at a batch boundary (`SnapshotSchedule`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.snapshot_footer_record.v0 import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0 import SnapshotHeaderRecord
from kio.static.primitive import i16, i64

from spark_log.metadata import (
    MetadataImage,
    MetadataRecord,
    Provenance,
    RecordDecodeError,
    decode_record,
    encode_record,
    load_snapshot,
)
from spark_log.protocol import ProtocolError, decode_entity, encode_entity
from spark_log.records import (
    ControlRecordType,
    CorruptRecordError,
    Record,
    build_batch,
    iter_batches,
    parse_control_record_type,
)
from spark_log.records.control_record import control_record_key

from .feature_control import IBP_3_6_IV2, record_version

__all__ = [
    "SNAPSHOT_BATCH_RECORDS",
    "SnapshotError",
    "SnapshotSchedule",
    "read_snapshot",
    "snapshot_id",
    "snapshot_records",
    "write_snapshot",
]

SNAPSHOT_BATCH_RECORDS = 1024  # Kafka's SnapshotEmitter DEFAULT_BATCH_SIZE
SNAPSHOT_VERSION = 0  # ControlRecordUtils.SNAPSHOT_HEADER/FOOTER_CURRENT_VERSION
_SKIPPED_CONTROL = (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS)


class SnapshotError(ValueError):
    """Bytes that are not a metadata snapshot: no header first, no footer last, a batch or
    record that does not decode. The message says which."""


def snapshot_id(image: MetadataImage) -> tuple[int, int]:
    """(end offset, epoch) of a snapshot of `image`: the offset after its last record."""
    return image.provenance.offset + 1, image.provenance.epoch


def write_snapshot(image: MetadataImage, *, now_ms: int, last_contained_log_time_ms: int,
                   metadata_version: int | None = None,
                   batch_records: int = SNAPSHOT_BATCH_RECORDS) -> bytes:
    """The snapshot of `image`, as Kafka writes it. `now_ms` stamps the batches;
    `last_contained_log_time_ms` is the append time of the image's last record."""
    version = metadata_version or image.metadata_version or IBP_3_6_IV2
    epoch = image.provenance.epoch
    header = encode_entity(SnapshotHeaderRecord(
        version=i16(SNAPSHOT_VERSION),
        last_contained_log_timestamp=i64(last_contained_log_time_ms)))
    out = [_control_batch(0, epoch, now_ms, ControlRecordType.SNAPSHOT_HEADER, header)]
    offset = 1
    records = image.to_records()
    for start in range(0, len(records), batch_records):
        chunk = records[start:start + batch_records]
        out.append(_data_batch(offset, epoch, now_ms, chunk, version))
        offset += len(chunk)
    footer = encode_entity(SnapshotFooterRecord(version=i16(SNAPSHOT_VERSION)))
    out.append(_control_batch(offset, epoch, now_ms, ControlRecordType.SNAPSHOT_FOOTER, footer))
    return b"".join(out)


def _control_batch(offset: int, epoch: int, now_ms: int, control: ControlRecordType,
                   value: bytes) -> bytes:
    return build_batch([Record(offset, now_ms, control_record_key(control), value)],
                       base_offset=offset, is_control=True, partition_leader_epoch=epoch)


def _data_batch(offset: int, epoch: int, now_ms: int, records: Sequence[MetadataRecord],
                metadata_version: int) -> bytes:
    return build_batch(
        [Record(offset + i, now_ms, None, encode_record(record, record_version(
            record, metadata_version))) for i, record in enumerate(records)],
        base_offset=offset, partition_leader_epoch=epoch)


def read_snapshot(data: bytes | memoryview, end_offset: int, epoch: int) -> MetadataImage:
    """The image snapshot (`end_offset`, `epoch`) holds. Raises SnapshotError."""
    return load_snapshot(snapshot_records(data), Provenance(end_offset - 1, epoch))


def snapshot_records(data: bytes | memoryview) -> list[MetadataRecord]:
    """The metadata records of a snapshot, its header and footer checked."""
    records: list[MetadataRecord] = []
    controls: list[ControlRecordType] = []
    try:
        for view in iter_batches(data):
            batch = view.decode()
            for record in batch.records:
                if batch.header.is_control:
                    controls.append(_control(record))
                elif record.value is None:
                    raise SnapshotError(f"the record at offset {record.offset} has no value")
                else:
                    records.append(decode_record(record.value))
    except (CorruptRecordError, RecordDecodeError) as exc:
        raise SnapshotError(f"not a metadata snapshot: {exc}") from None
    if not controls or controls[0] is not ControlRecordType.SNAPSHOT_HEADER:
        raise SnapshotError("a snapshot starts with a SnapshotHeaderRecord")
    if len(controls) < 2 or controls[-1] is not ControlRecordType.SNAPSHOT_FOOTER:
        raise SnapshotError("a snapshot ends with a SnapshotFooterRecord")
    return records


def _control(record: Record) -> ControlRecordType:
    control = parse_control_record_type(record.key)
    if control is ControlRecordType.SNAPSHOT_HEADER:
        _decode(SnapshotHeaderRecord, record)
    elif control is ControlRecordType.SNAPSHOT_FOOTER:
        _decode(SnapshotFooterRecord, record)
    elif control not in _SKIPPED_CONTROL:
        raise SnapshotError(f"unexpected control record {control.name} at offset "
                            f"{record.offset}")
    return control


def _decode(entity: type, record: Record) -> None:
    try:
        decode_entity(entity, record.value or b"")
    except ProtocolError as exc:
        raise SnapshotError(f"the {entity.__name__} at offset {record.offset} does not "
                            f"decode: {exc}") from None


@dataclass
class SnapshotSchedule:
    """When the next snapshot is due (Kafka's SnapshotGenerator).

    Invariant: `bytes_since` counts the bytes of the record batches replayed since the last
    snapshot was taken or loaded, at `last_snapshot_ms`; times are milliseconds, passed in.
    """

    max_record_bytes: int
    max_interval_ms: int
    last_snapshot_ms: int
    bytes_since: int = 0

    def replayed(self, batch_bytes: int) -> None:
        """A committed batch of `batch_bytes` was replayed."""
        self.bytes_since += batch_bytes

    def due(self, now_ms: int) -> str | None:
        """Why a snapshot is due now, or None."""
        if self.bytes_since >= self.max_record_bytes:
            return f"we have replayed at least {self.max_record_bytes} bytes"
        if self.max_interval_ms and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            return f"we have waited at least {self.max_interval_ms // 60_000} minute(s)"
        return None

    def reset(self, now_ms: int) -> None:
        """A snapshot was taken or loaded at `now_ms`."""
        self.bytes_since = 0
        self.last_snapshot_ms = now_ms
