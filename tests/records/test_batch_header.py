"""The 61-byte batch header: parsing, sanity checks, CRC coverage and in-place patches."""

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.batch_header import (
    HEADER_SIZE,
    Compression,
    TimestampType,
    compute_crc,
    iter_headers,
    peek_size,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    verify_crc,
)
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record import Record
from spark_log.records.record_batch import build_batch

RECORDS = [Record(i, 100 + i, b"k", b"v" * i) for i in range(5)]


def test_header_fields_of_a_built_batch():
    batch = build_batch(
        RECORDS,
        base_offset=0,
        compression=Compression.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=3,
        producer_epoch=4,
        base_sequence=5,
        is_transactional=True,
        partition_leader_epoch=6,
        max_timestamp=999,
    )
    header = read_header(batch)
    assert (header.size, header.last_offset, header.next_offset) == (len(batch), 4, 5)
    assert (header.compression, header.timestamp_type) == (
        Compression.GZIP,
        TimestampType.LOG_APPEND_TIME,
    )
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert (header.producer_id, header.has_producer_id, header.last_sequence) == (3, True, 9)
    assert (header.partition_leader_epoch, header.max_timestamp, header.records_count) == (
        6,
        999,
        5,
    )


@settings(max_examples=50, deadline=None)
@given(st.integers(0, (1 << 31) - 1), st.integers(0, 1000))
def test_last_sequence_wraps_like_kafka(base_sequence, delta):
    records = [Record(delta, 0, None, None)]
    header = read_header(build_batch(records, producer_id=1, base_sequence=base_sequence))
    assert header.last_sequence == (base_sequence + delta) % (1 << 31)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:60], "a batch header needs 61"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic 1"),
        (lambda b: b[:8] + (10).to_bytes(4, "big") + b[12:], "batch length 10 too small"),
        (lambda b: b[:-1], "runs past the end"),
        (
            lambda b: b[:57] + b"\xff\xff\xff\xff" + b[61:],
            "negative last offset delta or record count",
        ),
    ],
)
def test_read_header_rejects_malformed_headers(mutate, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        read_header(mutate(build_batch(RECORDS)))


def test_crc_covers_attributes_to_the_end():
    batch = bytearray(build_batch(RECORDS))
    assert compute_crc(batch, 0, len(batch)) == crc32c(bytes(batch[21:])) == read_header(batch).crc
    batch[30] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        verify_crc(batch, 0, read_header(batch))


def test_patching_offset_and_leader_epoch_keeps_the_crc_valid():
    batch = bytearray(build_batch(RECORDS))
    set_base_offset(batch, 0, 1 << 40)
    set_partition_leader_epoch(batch, 0, 17)
    header = read_header(batch)
    verify_crc(batch, 0, header)
    assert (header.base_offset, header.partition_leader_epoch) == (1 << 40, 17)


def test_peek_size_and_iter_headers_walk_a_torn_log():
    one = build_batch(RECORDS)
    log = one + one + one[:HEADER_SIZE]
    assert peek_size(log) == len(one)
    assert peek_size(log[:11]) is None
    walked = []
    with pytest.raises(CorruptRecordError, match=f"batch at byte {2 * len(one)}"):
        for pos, header in iter_headers(log):
            walked.append((pos, header.records_count))
    assert walked == [(0, 5), (len(one), 5)]
    assert [pos for pos, _ in iter_headers(log, 0, 2 * len(one))] == [0, len(one)]
