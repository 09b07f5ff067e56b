"""The image a node builds by replaying the metadata log: replaying a log, loading a snapshot of
it and replaying in any batching give equal images; the snapshot holds Kafka's records in
Kafka's order."""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.codec import decode_record, encode_record
from spark_log.metadata.delta import MetadataDelta, load_snapshot, replay_records
from spark_log.metadata.image import (
    ConfigResource,
    ConfigResourceType,
    MetadataImage,
    Provenance,
)
from spark_log.metadata.partition_registration import PartitionRegistration
from spark_log.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from tests.metadata.history import BROKER_IDS, history

HISTORIES = settings(max_examples=60, deadline=None)


def replay(records, image=MetadataImage.EMPTY, provenance=None):
    return replay_records(image, records, provenance or Provenance(len(records) - 1, 1))


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(1, 60))
def test_a_snapshot_of_a_replayed_log_loads_to_the_same_image(rng, steps):
    log = history(rng, steps)
    image = replay(log)
    assert load_snapshot(image.to_records(), image.provenance) == image


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(0, 60), st.data())
def test_an_image_is_empty_exactly_when_it_writes_no_records(rng, steps, data):
    log = history(rng, steps)
    image = replay(log[: data.draw(st.integers(0, len(log)))])
    assert image.is_empty == (image.to_records() == [])


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(1, 60), st.data())
def test_snapshot_then_rest_of_the_log_equals_the_whole_log(rng, steps, data):
    log = history(rng, steps)
    cut = data.draw(st.integers(0, len(log)))
    head = replay(log[:cut], provenance=Provenance(cut - 1, 1))
    loaded = load_snapshot(head.to_records(), head.provenance)
    assert replay(log[cut:], loaded, Provenance(len(log) - 1, 1)) == replay(log)


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(1, 60), st.data())
def test_any_batching_of_the_log_gives_the_same_image(rng, steps, data):
    log = history(rng, steps)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(log)), max_size=6)))
    image = MetadataImage.EMPTY
    for start, end in zip([0, *cuts], [*cuts, len(log)], strict=True):
        image = replay_records(image, log[start:end], Provenance(end - 1, 1))
    assert image == replay(log)


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(1, 40))
def test_the_log_read_back_from_bytes_builds_the_same_image(rng, steps):
    log = history(rng, steps)
    assert replay([decode_record(encode_record(record)) for record in log]) == replay(log)


@HISTORIES
@given(st.randoms(use_true_random=False), st.integers(1, 60), st.integers(0, 60))
def test_replaying_an_image_whole_is_replaying_its_records(rng, steps, before_steps):
    image = replay(history(rng, steps))
    for before in (MetadataImage.EMPTY, replay(history(rng, before_steps))):
        by_records, whole = (MetadataDelta(before, snapshot=True) for _ in range(2))
        by_records.replay_all(image.to_records())
        whole.replay_image(image)
        assert whole.apply(image.provenance) == by_records.apply(image.provenance) == image
        assert whole.topics.created_topic_ids == by_records.topics.created_topic_ids
        assert whole.topics.changed_topics == by_records.topics.changed_topics
        assert dict(whole.deleted_topics) == dict(by_records.deleted_topics)
        for broker_id in BROKER_IDS:
            assert whole.local_changes(broker_id) == by_records.local_changes(broker_id)


def test_a_snapshot_over_an_image_replaces_it_whole():
    old = replay(history(random.Random(1), 40))
    new = replay(history(random.Random(2), 40))
    delta = MetadataDelta(old, snapshot=True)
    delta.replay_all(new.to_records())
    assert delta.apply(new.provenance) == new
    assert set(delta.deleted_topics) == set(old.topics) - set(new.topics)


def test_snapshot_records_come_in_kafkas_order():
    topic_id = uuid.UUID(int=7)
    image = replay([
        ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=5000),
        ConfigRecord(resource_type=2, resource_name="b", name="x", value="1"),
        TopicRecord(name="b", topic_id=topic_id),
        PartitionRecord(partition_id=1, topic_id=topic_id, replicas=(2,), isr=(2,), leader=2),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(2,), isr=(2,), leader=2),
        RegisterBrokerRecord(broker_id=2, broker_epoch=3, rack=None),
        FeatureLevelRecord(name="group.version", feature_level=1),
        FeatureLevelRecord(name="metadata.version", feature_level=20),
    ])
    names = [(type(record).__name__, getattr(record, "partition_id", None))
             for record in image.to_records()]
    assert names == [("FeatureLevelRecord", None), ("FeatureLevelRecord", None),
                     ("RegisterBrokerRecord", None), ("TopicRecord", None),
                     ("PartitionRecord", 0), ("PartitionRecord", 1), ("ConfigRecord", None),
                     ("ProducerIdsRecord", None)]
    assert image.to_records()[0].name == "metadata.version"
    assert image.to_records()[-1] == ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                                       next_producer_id=5000)


def test_the_image_answers_by_name_and_by_id():
    topic_id, incarnation = uuid.UUID(int=9), uuid.UUID(int=10)
    image = replay([
        FeatureLevelRecord(name="metadata.version", feature_level=20),
        RegisterBrokerRecord(broker_id=1, broker_epoch=4, incarnation_id=incarnation, rack="r1",
                             end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=1),)),
        UnfenceBrokerRecord(id=1, epoch=4),
        TopicRecord(name="events", topic_id=topic_id),
        ConfigRecord(resource_type=2, resource_name="events", name="retention.ms", value="9"),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1,), isr=(1,), leader=1,
                        leader_epoch=3, partition_epoch=4),
    ], provenance=Provenance(41, 2))
    assert image.provenance == Provenance(41, 2)
    assert image.metadata_version == 20
    assert image.topic("events") is image.topics[topic_id]
    assert image.partition("events", 0) == PartitionRegistration(
        replicas=(1,), isr=(1,), leader=1, leader_epoch=3, partition_epoch=4)
    assert image.partition("events", 1) is None
    assert image.topic_configs("events") == {"retention.ms": "9"}
    assert image.configs == {ConfigResource(ConfigResourceType.TOPIC, "events"):
                             {"retention.ms": "9"}}
    broker = image.broker(1)
    assert broker is not None and broker.is_active and broker.rack == "r1"
    assert broker.endpoint("PLAINTEXT").port == 1
    assert broker.incarnation_id == incarnation


def test_the_empty_image_writes_no_records():
    assert MetadataImage.EMPTY.to_records() == []
    assert MetadataImage.EMPTY.is_empty
    assert load_snapshot([], Provenance(-1, -1)) == MetadataImage.EMPTY
