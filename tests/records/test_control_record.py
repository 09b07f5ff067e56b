"""Control records: marker layout as Kafka writes it, parsing, and skipping unknown types."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.batch_header import NO_SEQUENCE, TimestampType
from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    control_record_key,
    end_transaction_marker_value,
    parse_control_record_type,
    parse_end_transaction_marker,
    read_end_transaction_marker,
)
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record import Record
from spark_log.records.record_batch import build_batch, decode_batch

MARKER_TYPES = st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT])


def control_batch(key: bytes | None, value: bytes | None) -> bytes:
    record = Record(0, 1, key, value)
    return build_batch(
        [record], producer_id=1, producer_epoch=0, is_transactional=True, is_control=True
    )


def test_key_and_value_layout():
    assert control_record_key(ControlRecordType.ABORT) == b"\x00\x00\x00\x00"
    assert control_record_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert end_transaction_marker_value(7) == b"\x00\x00\x00\x00\x00\x07"


@settings(max_examples=50, deadline=None)
@given(
    MARKER_TYPES,
    st.integers(0, (1 << 31) - 1),
    st.integers(0, 1 << 40),
    st.integers(0, 32767),
    st.integers(0, 1 << 40),
    st.integers(-1, 100),
    st.integers(0, 1 << 42),
)
def test_marker_batch_round_trip(kind, coordinator_epoch, pid, epoch, offset, leader_epoch, ts):
    marker = EndTransactionMarker(kind, coordinator_epoch)
    batch = build_end_transaction_batch(
        marker,
        producer_id=pid,
        producer_epoch=epoch,
        timestamp=ts,
        base_offset=offset,
        partition_leader_epoch=leader_epoch,
    )
    decoded = decode_batch(batch)
    header = decoded.header
    assert header.is_control and header.is_transactional
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        pid,
        epoch,
        NO_SEQUENCE,
    )
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (offset, 1, 0)
    assert (header.partition_leader_epoch, header.max_timestamp) == (leader_epoch, ts)
    assert read_end_transaction_marker(decoded) == marker
    assert parse_end_transaction_marker(decoded.records[0]) == marker


def test_newer_versions_parse_as_version_zero():
    decoded = decode_batch(control_batch(b"\x00\x05\x00\x01extra", b"\x00\x03\x00\x00\x00\x09more"))
    assert read_end_transaction_marker(decoded) == EndTransactionMarker(ControlRecordType.COMMIT, 9)


@pytest.mark.parametrize("type_id", [2, 5, 6, 7, 99, -7])
def test_other_and_unknown_control_types_are_skipped(type_id):
    decoded = decode_batch(control_batch(struct.pack(">hh", 0, type_id), b""))
    assert read_end_transaction_marker(decoded) is None
    expected = ControlRecordType(type_id) if 0 <= type_id <= 6 else ControlRecordType.UNKNOWN
    assert parse_control_record_type(decoded.records[0].key) == expected


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, b"\x00" * 6, "found a null key"),
        (b"\x00\x00\x01", b"\x00" * 6, "found only 3 bytes"),
        (b"\xff\xff\x00\x01", b"\x00" * 6, "invalid version found for control record: -1"),
        (b"\x00\x00\x00\x01", None, "found a null value"),
        (b"\x00\x00\x00\x00", b"\x00\x00\x00", "found only 3 bytes"),
        (b"\x00\x00\x00\x01", b"\x80\x00\x00\x00\x00\x00", "end transaction marker: -32768"),
    ],
)
def test_malformed_markers_raise(key, value, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        read_end_transaction_marker(decode_batch(control_batch(key, value)))


def test_control_batch_without_records_is_corrupt():
    batch = build_batch([], producer_id=1, is_transactional=True, is_control=True)
    with pytest.raises(CorruptRecordError, match="without a control record"):
        read_end_transaction_marker(decode_batch(batch))


def test_reading_a_marker_from_a_data_batch_is_a_caller_error():
    with pytest.raises(ValueError, match="not a control batch"):
        read_end_transaction_marker(decode_batch(build_batch([Record(0, 0, None, b"x")])))


def test_only_commit_and_abort_build_marker_batches():
    marker = EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 0)
    with pytest.raises(ValueError, match="not a transaction marker"):
        build_end_transaction_batch(marker, producer_id=1, producer_epoch=0, timestamp=0)
    with pytest.raises(ValueError, match="UNKNOWN"):
        control_record_key(ControlRecordType.UNKNOWN)
    with pytest.raises(ValueError, match="LEADER_CHANGE is not a transaction marker"):
        parse_end_transaction_marker(
            Record(0, 0, control_record_key(ControlRecordType.LEADER_CHANGE), b"")
        )
