"""The shared batch decoder: each committed batch decoded once for the readers of one process."""

from __future__ import annotations

import uuid

import pytest

from spark_log.controller.batch_decoder import BatchDecoder
from spark_log.controller.controller_log import ControllerLog
from spark_log.controller.metadata_loader import MetadataLoader, MetadataLoadError, decode_batch
from spark_log.metadata import MetadataRecord, encode_record
from spark_log.metadata.records import PartitionChangeRecord, TopicRecord
from spark_log.raft.messages import Batch

TOPIC_ID = uuid.UUID(int=7)


def batch(base_offset: int, count: int = 2) -> Batch:
    records = [encode_record(PartitionChangeRecord(partition_id=p, topic_id=TOPIC_ID, leader=p))
               for p in range(base_offset, base_offset + count)]
    return Batch(base_offset, 1, tuple(records))


class Counting:
    """decode_batch, counting the batches it decodes."""

    def __init__(self) -> None:
        self.decoded: list[int] = []

    def __call__(self, b: Batch) -> list[MetadataRecord]:
        self.decoded.append(b.base_offset)
        return decode_batch(b)


def test_two_readers_share_one_decode_of_each_batch() -> None:
    counting = Counting()
    decoder = BatchDecoder(readers=2, decode=counting)
    batches = [batch(0), batch(2), batch(4)]
    first = [decoder(b) for b in batches]
    assert decoder.kept == 3
    second = [decoder(b) for b in batches]
    assert counting.decoded == [0, 2, 4]
    assert first == second == [decode_batch(b) for b in batches]
    assert all(a is not b for a, b in zip(first, second, strict=True))  # a list each
    assert decoder.kept == 0


def test_an_equal_batch_object_is_decoded_again() -> None:
    counting = Counting()
    decoder = BatchDecoder(readers=2, decode=counting)
    decoder(batch(0))
    assert decoder(batch(0)) == decode_batch(batch(0))
    assert counting.decoded == [0, 0]


def test_kept_records_are_bounded_and_a_late_reader_decodes_again() -> None:
    counting = Counting()
    decoder = BatchDecoder(readers=2, max_kept=4, decode=counting)
    batches = [batch(offset) for offset in range(0, 10, 2)]  # five batches of two records
    for b in batches:
        decoder(b)
    assert decoder.kept == 2  # four records at most
    late = [decoder(b) for b in batches]
    assert late == [decode_batch(b) for b in batches]
    assert counting.decoded == [0, 2, 4, 6, 8, 0, 2, 4]  # 6 and 8 were still kept
    assert decoder.kept == 0


def test_a_batch_that_does_not_decode_fails_every_reader() -> None:
    bad = Batch(5, 1, (b"\x01\x63\x00",))  # frame 1, unknown type 99
    decoder = BatchDecoder(readers=2)
    for _ in range(2):
        with pytest.raises(MetadataLoadError, match="at offset 5: the record 016300"):
            decoder(bad)
    assert decoder.kept == 0


def test_one_reader_keeps_nothing() -> None:
    decoder = BatchDecoder(readers=1)
    assert decoder(batch(0)) == decode_batch(batch(0))
    assert decoder.kept == 0


def test_a_controller_log_and_a_loader_replay_the_same_records_from_one_decode() -> None:
    counting = Counting()
    decoder = BatchDecoder(readers=2, decode=counting)
    loader = MetadataLoader(decode=decoder)
    log = ControllerLog(decoder)
    topic = Batch(0, 1, (encode_record(TopicRecord(name="t", topic_id=TOPIC_ID)),))
    loader.handle_commit([topic])
    log.committed_batches([topic])
    assert counting.decoded == [0]
    assert loader.image.topics_by_name["t"].id == TOPIC_ID
    assert log.committed.topics_by_name["t"].id == TOPIC_ID
    assert decoder.kept == 0
