"""Quorum batches read back from RecordBatches: the values of a data batch are read without
decoding each record whole, and whatever is not a quorum batch's records is read (or refused)
as before."""

from __future__ import annotations

import pytest

from spark_log.controller.batch_codec import LeaderChanges, decode_batches, encode_batches
from spark_log.raft.messages import Batch
from spark_log.raft.replica import LEADER_CHANGE_RECORD
from spark_log.records import CorruptRecordError, Record, build_batch


def test_data_and_control_batches_read_back_as_written() -> None:
    changes = LeaderChanges(1, frozenset({1, 2, 3}))
    batches = [Batch(0, 4, (LEADER_CHANGE_RECORD,), control=True),
               Batch(1, 4, (b"a", b"", b"c" * 300)), Batch(4, 4, tuple(bytes([i]) for i in
                                                                        range(200)))]
    read = decode_batches(encode_batches(batches, 1_000, changes))
    assert read[1:] == batches[1:]
    assert read[0].control and read[0].records == (changes.value(4),)


def test_records_with_keys_headers_or_null_values_are_read_as_before() -> None:
    records = [Record(10, 5, b"k", b"one", ()), Record(11, 5, None, None, ()),
               Record(12, 5, None, b"three", (("h", b"v"),))]
    read = decode_batches(build_batch(records, base_offset=10, partition_leader_epoch=2))
    assert read == [Batch(10, 2, (b"one", b"", b"three"))]


def test_a_batch_with_a_gap_in_its_offsets_is_refused() -> None:
    records = [Record(10, 5, None, b"a", ()), Record(12, 5, None, b"b", ())]
    with pytest.raises(CorruptRecordError, match="batch at offset 10 has gaps in its offsets"):
        decode_batches(build_batch(records, base_offset=10))


def test_a_damaged_batch_is_refused() -> None:
    data = bytearray(build_batch([Record(0, 5, None, b"value", ())], base_offset=0))
    data[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batches(bytes(data))
