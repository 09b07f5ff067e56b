"""Metadata snapshots in Kafka's format: header, the image's records in batches, footer; read
back into an equal image; damaged snapshots refused; and when one is due."""

from __future__ import annotations

import pytest

from spark_log.controller.metadata_snapshot import (
    SnapshotError,
    SnapshotSchedule,
    read_snapshot,
    snapshot_id,
    snapshot_records,
    write_snapshot,
)
from spark_log.metadata import MetadataImage, Provenance, decode_record_and_version, replay_records
from spark_log.metadata.records import ProducerIdsRecord, RegisterBrokerRecord
from spark_log.records import ControlRecordType, iter_batches, parse_control_record_type

from .control_fixtures import broker, image_of, topic, topic_config

IMAGE = image_of(broker(1), broker(2, fenced=True), topic("t", [[1, 2], [2, 1]]),
                 topic("u", [[1]] * 5), topic_config("t", "retention.ms", "9"),
                 ProducerIdsRecord(broker_id=1, broker_epoch=101, next_producer_id=3000))


def batches(data: bytes) -> list:  # type: ignore[type-arg]
    return [view.decode() for view in iter_batches(data)]


def test_a_snapshot_is_a_header_the_records_in_batches_and_a_footer() -> None:
    image = replay_records(IMAGE, [], Provenance(IMAGE.provenance.offset, 3))
    data = write_snapshot(image, now_ms=1234, last_contained_log_time_ms=999, batch_records=4)
    decoded = batches(data)
    header, *middle, footer = decoded
    assert header.header.is_control and footer.header.is_control
    assert parse_control_record_type(header.records[0].key) is ControlRecordType.SNAPSHOT_HEADER
    assert parse_control_record_type(footer.records[0].key) is ControlRecordType.SNAPSHOT_FOOTER
    assert header.records[0].value == bytes.fromhex("0000" "00000000000003e7" "00")
    assert footer.records[0].value == bytes.fromhex("0000" "00")
    records = image.to_records()
    assert [len(b.records) for b in middle] == [4] * (len(records) // 4) + (
        [len(records) % 4] if len(records) % 4 else [])
    offsets = [r.offset for b in decoded for r in b.records]
    assert offsets == list(range(len(records) + 2))
    assert {b.header.partition_leader_epoch for b in decoded} == {3}
    assert all(r.timestamp == 1234 for b in decoded for r in b.records)
    values = [decode_record_and_version(r.value) for b in middle for r in b.records]
    assert [record for record, _ in values] == records
    assert {version for record, version in values if isinstance(record, RegisterBrokerRecord)} \
        == {2}


def test_reading_a_snapshot_back_gives_the_same_image() -> None:
    end_offset, epoch = snapshot_id(IMAGE)
    assert end_offset == IMAGE.provenance.offset + 1
    data = write_snapshot(IMAGE, now_ms=1, last_contained_log_time_ms=1)
    loaded = read_snapshot(data, end_offset, epoch)
    assert loaded == IMAGE
    assert loaded.provenance == IMAGE.provenance
    empty = write_snapshot(MetadataImage.EMPTY, now_ms=1, last_contained_log_time_ms=-1)
    assert read_snapshot(empty, *snapshot_id(MetadataImage.EMPTY)) == MetadataImage.EMPTY


def test_damaged_snapshots_are_refused() -> None:
    data = write_snapshot(IMAGE, now_ms=1, last_contained_log_time_ms=1, batch_records=3)
    views = list(iter_batches(data))
    header_end = views[0].size
    footer_start = views[-1].position
    with pytest.raises(SnapshotError, match="starts with a SnapshotHeaderRecord"):
        snapshot_records(data[header_end:])
    with pytest.raises(SnapshotError, match="ends with a SnapshotFooterRecord"):
        snapshot_records(data[:footer_start])
    with pytest.raises(SnapshotError, match="not a metadata snapshot"):
        snapshot_records(data[:-1])
    flipped = bytearray(data)
    flipped[header_end + 70] ^= 0xFF
    with pytest.raises(SnapshotError):
        snapshot_records(bytes(flipped))


def test_a_snapshot_is_due_after_enough_bytes_or_time() -> None:
    schedule = SnapshotSchedule(max_record_bytes=1000, max_interval_ms=60_000,
                                last_snapshot_ms=0)
    schedule.replayed(600)
    assert schedule.due(59_999) is None
    assert schedule.due(60_000) == "we have waited at least 1 minute(s)"
    schedule.replayed(400)
    assert schedule.due(1) == "we have replayed at least 1000 bytes"
    schedule.reset(70_000)
    assert schedule.due(100_000) is None
    never_by_time = SnapshotSchedule(max_record_bytes=10, max_interval_ms=0, last_snapshot_ms=0)
    assert never_by_time.due(10**12) is None
