"""The record memo: each distinct metadata record value decoded once while a node starts."""

from __future__ import annotations

import uuid

import pytest

from spark_log.controller.batch_decoder import BatchDecoder
from spark_log.controller.metadata_loader import MetadataLoader, MetadataLoadError, decode_batch
from spark_log.controller.record_memo import RecordMemo
from spark_log.metadata import MetadataRecord, RecordDecodeError, decode_record, encode_record
from spark_log.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from spark_log.raft.messages import Batch

TOPIC_ID = uuid.UUID(int=7)


def change(partition: int, leader: int) -> bytes:
    return encode_record(PartitionChangeRecord(partition_id=partition, topic_id=TOPIC_ID,
                                               leader=leader))


class Counting:
    """decode_record, counting the values it decodes."""

    def __init__(self) -> None:
        self.decoded: list[bytes] = []

    def __call__(self, value: bytes) -> MetadataRecord:
        self.decoded.append(value)
        return decode_record(value)


def test_a_repeated_value_is_decoded_once_and_gives_the_same_record() -> None:
    counting = Counting()
    memo = RecordMemo(decode=counting)
    values = [change(0, -1), change(0, 1), change(0, -1), change(0, 1)]
    records = [memo(value) for value in values]
    assert counting.decoded == values[:2]
    assert records == [decode_record(value) for value in values]
    assert records[0] is records[2] and records[1] is records[3]
    assert len(memo) == 2


def test_a_value_that_does_not_decode_is_not_kept_and_fails_each_time() -> None:
    memo = RecordMemo()
    for _ in range(2):
        with pytest.raises(RecordDecodeError, match="unknown metadata record type 99"):
            memo(b"\x01\x63\x00")
    assert len(memo) == 0


def test_a_full_memo_starts_over() -> None:
    counting = Counting()
    memo = RecordMemo(max_entries=2, decode=counting)
    for leader in (1, 2, 3, 1):
        memo(change(0, leader))
    # 1 and 2 filled it; 3 emptied it and was kept; 1 is decoded again
    assert counting.decoded == [change(0, leader) for leader in (1, 2, 3, 1)]
    assert len(memo) == 2


def test_a_closed_memo_keeps_nothing_and_decodes_every_value() -> None:
    counting = Counting()
    memo = RecordMemo(decode=counting)
    memo(change(0, 1))
    memo.close()
    assert len(memo) == 0
    assert memo(change(0, 1)) == decode_record(change(0, 1))
    assert counting.decoded == [change(0, 1)] * 2
    assert len(memo) == 0


def test_the_memo_must_hold_a_record() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        RecordMemo(max_entries=0)


def test_a_loader_replays_a_log_of_repeated_restarts_through_the_memo_as_without() -> None:
    """Three 'restarts' of the same leadership changes: the image is the one the log builds
    without a memo (the leader epoch counts every change, shared records or not)."""
    counting = Counting()
    memo = RecordMemo(decode=counting)
    create = [encode_record(TopicRecord(name="t", topic_id=TOPIC_ID)),
              encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,),
                                            isr=(1,), leader=1, leader_epoch=0,
                                            partition_epoch=0))]
    batches = [Batch(0, 1, tuple(create))]
    for restart in range(3):
        batches.append(Batch(2 + 2 * restart, 1, (change(0, -1), change(0, 1))))
    with_memo = MetadataLoader(decode=BatchDecoder(1, decode=lambda b: decode_batch(b, memo)))
    without = MetadataLoader()
    with_memo.handle_commit(batches)
    without.handle_commit(batches)
    assert with_memo.image == without.image
    partition = with_memo.image.topics_by_name["t"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (1, 6, 6)
    assert len(counting.decoded) == 4  # the topic, the partition, and the two changes


def test_a_bad_value_through_the_memo_names_its_offset() -> None:
    memo = RecordMemo()
    with pytest.raises(MetadataLoadError, match="at offset 6: the record 016300"):
        decode_batch(Batch(5, 1, (change(0, 1), b"\x01\x63\x00")), memo)
