"""Cross-check against an independent v2 codec, kafka-python's DefaultRecordBatch(Builder):
batches we build decode there, and batches it builds decode here, for every codec."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from spark_log.records.batch_header import Compression, TimestampType
from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from spark_log.records.record import Record
from spark_log.records.record_batch import build_batch, decode_batch

from .strategies import record_lists, timestamp_types

CODECS = list(Compression)
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def from_kafka_python(record) -> Record:
    return Record(record.offset, record.timestamp, record.key, record.value, tuple(record.headers))


@pytest.mark.parametrize("codec", CODECS)
@SETTINGS
@given(
    records=record_lists(min_size=1, base_offset=500), ts_type=timestamp_types, txn=st.booleans()
)
def test_our_batches_decode_in_kafka_python(kafka_python_codecs, codec, records, ts_type, txn):
    append_time = records[-1].timestamp + 1
    batch = build_batch(
        records,
        base_offset=500,
        compression=codec,
        timestamp_type=ts_type,
        producer_id=77 if txn else -1,
        producer_epoch=3 if txn else -1,
        base_sequence=12 if txn else -1,
        is_transactional=txn,
        max_timestamp=append_time if ts_type == TimestampType.LOG_APPEND_TIME else None,
    )
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert (theirs.compression_type, theirs.timestamp_type) == (codec, ts_type)
    assert (theirs.is_transactional, theirs.producer_id, theirs.base_sequence) == (
        txn,
        77 if txn else -1,
        12 if txn else -1,
    )
    assert (theirs.base_offset, theirs.last_offset) == (500, records[-1].offset)
    decoded = [from_kafka_python(r) for r in theirs]
    if ts_type == TimestampType.CREATE_TIME:
        assert decoded == records
    else:
        assert decoded == [r._replace(timestamp=append_time) for r in records]


@pytest.mark.parametrize("codec", CODECS)
@SETTINGS
@given(records=record_lists(max_size=15), txn=st.booleans())
def test_kafka_python_batches_decode_here(kafka_python_codecs, codec, records, txn):
    # A compressible record, so kafka-python keeps the codec instead of falling back to none.
    records = [
        Record(0, 1 << 40, b"pad", b"abc" * 200),
        *(r._replace(offset=r.offset + 1) for r in records),
    ]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=txn,
        producer_id=5 if txn else -1,
        producer_epoch=1 if txn else -1,
        base_sequence=0 if txn else -1,
        batch_size=1 << 30,
    )
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    decoded = decode_batch(bytes(builder.build()))
    assert decoded.header.compression == codec
    assert decoded.header.is_transactional == txn
    assert decoded.records == tuple(records)


def test_kafka_python_reads_our_large_records(kafka_python_codecs):
    value = bytes(range(256)) * 1500
    records = [Record(0, 10, b"big", value), Record(1, 11, None, value[::-1], (("h", value),))]
    for codec in CODECS:
        theirs = DefaultRecordBatch(bytearray(build_batch(records, compression=codec)))
        assert [from_kafka_python(r) for r in theirs] == records


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_kafka_python_reads_our_transaction_markers(kind):
    batch = build_end_transaction_batch(
        EndTransactionMarker(kind, 4), producer_id=8, producer_epoch=2, timestamp=99, base_offset=30
    )
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    (marker,) = list(theirs)
    assert (marker.offset, marker.version, marker.type) == (30, 0, int(kind))
    assert marker.commit == (kind == ControlRecordType.COMMIT)
