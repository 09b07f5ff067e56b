"""The metadata loader on a real lone-voter driver: images published per commit in order,
transactions applied at their end and dropped when aborted, batches committed together
published as one image (a start on a long log), a snapshot loaded at the next start as a whole
image, and a record that does not decode stopping the loader for good."""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from spark_log.controller.metadata_loader import MetadataLoader, MetadataLoadError
from spark_log.controller.metadata_snapshot import snapshot_id, write_snapshot
from spark_log.controller.metadata_transactions import (
    RecordRun,
    TransactionError,
    TransactionReader,
)
from spark_log.controller.raft_driver import RaftDriver
from spark_log.metadata import MetadataDelta, MetadataImage, MetadataRecord, encode_record
from spark_log.metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    TopicRecord,
)
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .controller_harness import ALONE
from .quorum_harness import CLUSTER_ID
from .support import eventually

MV = FeatureLevelRecord(name="metadata.version", feature_level=14)


def topic(name: str) -> TopicRecord:
    return TopicRecord(name=name, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name))


class Node:
    """A lone voter's driver and loader, and the images published."""

    def __init__(self, directory: Path) -> None:
        self.driver = RaftDriver(1, ALONE, directory, cluster_id=CLUSTER_ID,
                                 rng=random.Random(1))
        self.loader = MetadataLoader(self.driver, node_id=1)
        self.published: list[tuple[MetadataDelta, MetadataImage]] = []
        self.loader.add_publisher(lambda delta, image: self.published.append((delta, image)))

    async def start(self) -> Node:
        await self.driver.start()
        await eventually(lambda: self.driver.is_leader, 5, "the lone voter to lead")
        return self

    async def commit(self, *records: MetadataRecord, raw: Sequence[bytes] = ()) -> int:
        data = [encode_record(r) for r in records] + list(raw)
        offset = self.driver.propose(data)
        assert offset is not None
        await self.driver.wait_committed(offset, 5)
        return offset + len(data) - 1

    @property
    def topics(self) -> set[str]:
        return set(self.loader.image.topics_by_name)


def test_images_are_published_per_batch_and_transactions_at_their_end(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.commit(MV, topic("plain"))
        assert node.topics == {"plain"} and len(node.published) == 1
        delta, image = node.published[0]  # with the delta that made it
        assert delta.image == MetadataImage.EMPTY and image.topic("plain") is not None
        begin = await node.commit(BeginTransactionRecord(name="t1"), topic("a"))
        assert node.topics == {"plain"} and node.loader.offset < begin
        last = await node.commit(topic("b"), EndTransactionRecord(), topic("after"))
        assert node.topics == {"plain", "a", "b", "after"}
        assert node.loader.offset == last == node.loader.image.provenance.offset
        await node.commit(BeginTransactionRecord(name="t2"), topic("dropped"))
        await node.commit(AbortTransactionRecord(reason="test"))
        assert "dropped" not in node.topics
        offsets = [image.provenance.offset for _, image in node.published]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        image = await node.loader.wait_for_offset(last, 1)
        assert image.topic("after") is not None
        with pytest.raises(TimeoutError):
            await node.loader.wait_for_offset(last + 100, 0.05)
        await node.driver.close()
    asyncio.run(scenario())


def test_batches_committed_together_are_published_as_one_image(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.commit(MV, topic("one"))
        await node.commit(topic("two"))
        await node.commit(topic("three"))
        ends = [image for _, image in node.published]
        await node.driver.close()
        again = await Node(tmp_path).start()  # the whole log commits at once on a restart
        assert len(again.published) == 1
        delta, image = again.published[0]
        assert delta.image == MetadataImage.EMPTY  # one delta from nothing to the end state
        assert again.topics == {"one", "two", "three"}
        assert image.provenance == ends[-1].provenance
        await again.driver.close()
    asyncio.run(scenario())


def test_a_batch_that_fails_is_left_out_of_the_image_of_its_delivery(
        caplog: pytest.LogCaptureFixture) -> None:
    loader = MetadataLoader(node_id=1)
    published: list[MetadataImage] = []
    loader.add_publisher(lambda delta, image: published.append(image))
    good = Batch(0, 1, (encode_record(MV), encode_record(topic("good"))))
    half = Batch(2, 1, (encode_record(topic("in the bad batch")), b"\x00\xff\xff\xff"))
    with caplog.at_level(logging.ERROR, logger="spark_log.controller"):
        loader.handle_commit([good, half, Batch(4, 1, (encode_record(topic("after")),))])
    assert [set(image.topics_by_name) for image in published] == [{"good"}]
    assert loader.image.provenance.offset == 1 == loader.offset
    assert loader.error is not None and loader.error.offset == 3


def test_a_snapshot_is_loaded_as_a_whole_image_at_the_next_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        await node.commit(MV, topic("one"))
        await node.commit(topic("two"))
        image = node.loader.image
        node.driver.take_snapshot(OffsetAndEpoch(*snapshot_id(image)),
                                  write_snapshot(image, now_ms=0, last_contained_log_time_ms=0))
        await node.commit(topic("three"))
        await node.driver.close()
        again = await Node(tmp_path).start()
        assert again.published[0][0].snapshot  # the snapshot first, as one delta
        assert again.published[0][1] == image
        assert again.topics == {"one", "two", "three"}
        again.published.clear()
        late: list[MetadataImage] = []
        again.loader.add_publisher(lambda delta, img: late.append(img))
        assert late == [again.loader.image]  # a publisher added late gets the image at once
        await again.driver.close()
    asyncio.run(scenario())


def test_a_record_that_does_not_decode_stops_the_loader(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        node = await Node(tmp_path).start()
        good = await node.commit(MV, topic("good"))
        waiting = asyncio.ensure_future(node.loader.wait_for_offset(good + 10, 5))
        with caplog.at_level(logging.ERROR, logger="spark_log.controller"):
            bad = await node.commit(topic("in the bad batch"), raw=[b"\x00\xff\xff\xff"])
        with pytest.raises(MetadataLoadError, match=f"at offset {bad}"):
            await waiting
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "does not decode" in errors[0].getMessage()
        published = len(node.published)
        await node.commit(topic("later"))
        assert len(node.published) == published and node.topics == {"good"}
        assert node.loader.error is not None and node.loader.image.provenance.offset == good
        with pytest.raises(MetadataLoadError):
            await node.loader.wait_for_offset(0)
        await node.driver.close()
    asyncio.run(scenario())


def test_transaction_markers_out_of_place_are_refused() -> None:
    reader = TransactionReader()
    with pytest.raises(TransactionError, match="offset 3 ends no transaction"):
        reader.read(3, [EndTransactionRecord()])
    reader.read(0, [BeginTransactionRecord(name="x")])
    assert reader.open and reader.begin_offset == 0
    with pytest.raises(TransactionError, match="inside the one begun at offset 0"):
        reader.read(1, [BeginTransactionRecord(name="y")])
    assert reader.open  # nothing held changed
    reader.reset()
    assert not reader.open and reader.begin_offset == -1


def test_a_transaction_spanning_batches_holds_the_batches_between_its_markers() -> None:
    reader = TransactionReader()
    begin, end = BeginTransactionRecord(name="t"), EndTransactionRecord()
    assert reader.read(0, [topic("before")]) == [RecordRun(0, (topic("before"),))]
    assert reader.read(1, [begin, topic("a")]) == []
    assert reader.read(3, [topic("b"), topic("c")]) == []  # no marker: held whole
    assert reader.read(5, []) == []
    assert reader.read(5, [end, topic("after")]) == [
        RecordRun(1, (begin, topic("a"), topic("b"), topic("c"), end)),
        RecordRun(6, (topic("after"),))]
    assert not reader.open
