"""Control records: the transaction commit/abort markers of a control batch.

A control batch (attribute bit 5) holds control records instead of data. Each record's key is
(version int16, type int16); the transaction markers COMMIT and ABORT carry the value
(version int16, coordinator epoch int32). Kafka writes version 0 for both, one marker record per
batch, transactional bit set, no sequence. Readers parse newer key/value versions as version 0
and map a type they do not know to UNKNOWN, which callers skip, as Kafka's consumers do.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from .batch_header import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, TimestampType
from .errors import CorruptRecordError
from .record import Record
from .record_batch import DecodedBatch, build_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CURRENT_VERSION = 0


class ControlRecordType(IntEnum):
    """Control record types as Kafka numbers them; UNKNOWN stands for any other id."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft quorum records: never in topic partitions, recognised only
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


_KNOWN_TYPES = frozenset(int(t) for t in ControlRecordType) - {ControlRecordType.UNKNOWN}
_MARKER_TYPES = (ControlRecordType.ABORT, ControlRecordType.COMMIT)


class EndTransactionMarker(NamedTuple):
    """A COMMIT or ABORT marker and the epoch of the coordinator that wrote it."""

    type: ControlRecordType
    coordinator_epoch: int


def control_record_key(control_type: ControlRecordType) -> bytes:
    if control_type == ControlRecordType.UNKNOWN:
        raise ValueError("cannot serialize the UNKNOWN control record type")
    return _KEY.pack(_CURRENT_VERSION, control_type)


def parse_control_record_type(key: bytes | None) -> ControlRecordType:
    """The type named by a control record's key; UNKNOWN for ids this code does not know."""
    if key is None or len(key) < _KEY.size:
        found = "a null key" if key is None else f"only {len(key)} bytes"
        raise CorruptRecordError(
            f"invalid control record key: must have at least {_KEY.size} bytes, found {found}"
        )
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(
            f"invalid version found for control record: {version}, may indicate data corruption"
        )
    return ControlRecordType(type_id) if type_id in _KNOWN_TYPES else ControlRecordType.UNKNOWN


def end_transaction_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(_CURRENT_VERSION, coordinator_epoch)


def parse_end_transaction_marker(record: Record) -> EndTransactionMarker:
    """Parse a COMMIT/ABORT control record; CorruptRecordError if it is malformed, ValueError
    if its (valid) key names another control type."""
    control_type = parse_control_record_type(record.key)
    if control_type not in _MARKER_TYPES:
        raise ValueError(f"control record type {control_type.name} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _VALUE.size:
        found = "a null value" if value is None else f"only {len(value)} bytes"
        raise CorruptRecordError(
            f"invalid end transaction marker value: must have at least {_VALUE.size} bytes, "
            f"found {found}"
        )
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(
            f"invalid version found for end transaction marker: {version}, "
            "may indicate data corruption"
        )
    return EndTransactionMarker(control_type, coordinator_epoch)


def read_end_transaction_marker(batch: DecodedBatch) -> EndTransactionMarker | None:
    """The transaction marker a decoded control batch carries, or None when its first record is
    a control type other than COMMIT/ABORT (unknown types included), which readers skip.

    Raises ValueError for a batch that is not a control batch and CorruptRecordError for a
    control batch without records or with a malformed marker.
    """
    if not batch.header.is_control:
        raise ValueError("not a control batch")
    if not batch.records:
        raise CorruptRecordError("control batch without a control record")
    record = batch.records[0]
    if parse_control_record_type(record.key) not in _MARKER_TYPES:
        return None
    return parse_end_transaction_marker(record)


def build_end_transaction_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as Kafka's
    MemoryRecords.withEndTransactionMarker writes it."""
    if marker.type not in _MARKER_TYPES:
        raise ValueError(f"{marker.type!r} is not a transaction marker type")
    record = Record(
        base_offset,
        timestamp,
        control_record_key(marker.type),
        end_transaction_marker_value(marker.coordinator_epoch),
    )
    return build_batch(
        (record,),
        base_offset=base_offset,
        timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
