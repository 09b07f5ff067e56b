"""The one-pass writer of the partition records: the same bytes as the schema walk, and nothing
it cannot write (those fall back to the walk, which writes them or raises the precise error)."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.codec import _encode_by_schema, encode_record
from spark_log.metadata.errors import RecordEncodeError
from spark_log.metadata.records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from spark_log.metadata.write_plan import write_plan
from tests.metadata.strategies import for_every_record_version, records

TOPIC_ID = UUID(int=9)


def test_partition_records_have_the_fast_writer():
    for record_type in (PartitionRecord, PartitionChangeRecord):
        for version in range(record_type.HIGHEST_VERSION + 1):
            assert write_plan(record_type, version) is not None
    assert write_plan(TopicRecord, 0) is None  # a string: written by the schema walk


@for_every_record_version
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_fast_writer_writes_the_bytes_of_the_schema_walk(record_type, version, data):
    record = data.draw(records(record_type, version))
    fast = write_plan(record_type, version)
    if fast is None:
        return
    written = fast(record)
    assert written == _encode_by_schema(record, version)  # a valid record is never declined


@pytest.mark.parametrize(("record", "version"), [
    (PartitionChangeRecord(topic_id=TOPIC_ID, isr=(True,)), 0),  # a bool in an int32 array
    (PartitionChangeRecord(topic_id=TOPIC_ID, leader=2**31), 0),  # out of range
    (PartitionChangeRecord(topic_id=TOPIC_ID, replicas=("1",)), 0),  # type: ignore[arg-type]
    (PartitionChangeRecord(topic_id="x"), 0),  # type: ignore[arg-type]
    (PartitionChangeRecord(topic_id=TOPIC_ID, directories=(TOPIC_ID,)), 0),  # v0 has none
    (PartitionChangeRecord(topic_id=TOPIC_ID, eligible_leader_replicas=()), 1),
    (PartitionRecord(topic_id=TOPIC_ID, directories=("d",)), 2),  # type: ignore[arg-type]
    (PartitionRecord(topic_id=TOPIC_ID, replicas=None), 0),  # type: ignore[arg-type]
    (FenceBrokerRecord(id=True), 0),  # type: ignore[arg-type]
])
def test_what_the_fast_writer_declines_the_schema_walk_refuses(record, version):
    assert write_plan(type(record), version)(record) is None
    with pytest.raises(RecordEncodeError):
        encode_record(record, version)


def test_lists_and_long_arrays_are_written_as_the_schema_walk_writes_them():
    wide = PartitionChangeRecord(topic_id=TOPIC_ID, partition_id=3, isr=list(range(200)),
                                 directories=(TOPIC_ID,) * 200)  # type: ignore[arg-type]
    written = write_plan(PartitionChangeRecord, 2)(wide)
    assert written is not None and written == _encode_by_schema(wide, 2)
    assert len(written) > 4 * 200 + 16 * 200  # sizes and counts of two varint bytes
