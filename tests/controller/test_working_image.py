"""The working image: committed plus appended batches, committed as the high watermark passes
them, reverted on failure; register offsets follow the RegisterBrokerRecords replayed."""

from __future__ import annotations

import pytest

from spark_log.controller.working_image import WorkingImage
from spark_log.metadata import ImageError, MetadataImage, Provenance
from spark_log.metadata.records import RemoveTopicRecord, UnregisterBrokerRecord

from .control_fixtures import broker, image_of, topic, topic_id


def test_appended_batches_show_at_once_and_commit_in_order() -> None:
    working = WorkingImage()
    working.append([broker(1, epoch=0)], base_offset=0, epoch=1)
    working.append(topic("t", [[1]]), base_offset=1, epoch=1)
    assert working.image.topic("t") is not None
    assert working.committed is MetadataImage.EMPTY
    assert working.pending_batches == 2
    committed = working.commit(1)
    assert committed.broker(1) is not None and committed.topic("t") is None
    assert committed.provenance == Provenance(0, 1)
    working.commit(3)
    assert working.committed.topic("t") is not None and working.pending_batches == 0
    assert working.image is working.committed


def test_revert_drops_what_was_not_committed() -> None:
    working = WorkingImage()
    working.replay_committed([broker(1, epoch=0)], 0, 1)
    working.append([broker(2, epoch=1)], base_offset=1, epoch=1)
    assert working.register_offset(2) == 1
    assert working.revert().broker(2) is None
    assert working.image.broker(2) is None and working.register_offset(2) is None


def test_a_batch_that_does_not_replay_changes_nothing() -> None:
    working = WorkingImage()
    working.append([broker(1, epoch=0)], base_offset=0, epoch=1)
    with pytest.raises(ImageError):
        working.append([RemoveTopicRecord(topic_id=topic_id("nope"))], base_offset=1, epoch=1)
    with pytest.raises(ValueError, match="does not follow"):
        working.append([broker(2)], base_offset=0, epoch=1)
    assert working.pending_batches == 1


def test_register_offsets_come_from_the_records_or_the_snapshot() -> None:
    snapshot = image_of(broker(1, epoch=7))
    working = WorkingImage(snapshot)
    assert working.register_offset(1) == snapshot.provenance.offset
    working.append([broker(2, epoch=10), broker(1, epoch=7)], base_offset=10, epoch=2)
    assert (working.register_offset(2), working.register_offset(1)) == (10, 11)
    working.append([UnregisterBrokerRecord(broker_id=2, broker_epoch=10)], base_offset=12,
                   epoch=2)
    assert working.register_offset(2) is None
