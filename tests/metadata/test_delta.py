"""Replaying records into a MetadataDelta: records that contradict the image raise ImageError
naming the record and change nothing; brokers, configs, features and producer ids follow
Kafka's rules; `local_changes` tells one broker what to lead, follow and delete."""

from __future__ import annotations

import gc
import random
import uuid
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.metadata.delta import MetadataDelta, replay_records
from spark_log.metadata.errors import ImageError
from spark_log.metadata.image import MetadataImage, Provenance
from spark_log.metadata.local_changes import TopicPartition
from spark_log.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from tests.metadata.history import history

ZOO, BAR, NEW = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
LOCAL = 3
END = Provenance(99, 1)


def partition(topic_id, pid, replicas, leader=None, epoch=0):
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas, isr=replicas,
                           leader=replicas[0] if leader is None else leader,
                           leader_epoch=epoch, partition_epoch=epoch)


def image_of(*records):
    return replay_records(MetadataImage.EMPTY, records, Provenance(len(records) - 1, 1))


ZOO_IMAGE = image_of(
    RegisterBrokerRecord(broker_id=1, broker_epoch=10, rack=None),
    TopicRecord(name="zoo", topic_id=ZOO),
    partition(ZOO, 0, (0, 1, LOCAL)),
    partition(ZOO, 1, (LOCAL, 1, 2)),
    partition(ZOO, 2, (0, 1, LOCAL)),
    partition(ZOO, 3, (LOCAL, 1, 2)),
    partition(ZOO, 4, (0, 1, 2)),
    partition(ZOO, 5, (0, 1, 2)),
    ConfigRecord(resource_type=2, resource_name="zoo", name="retention.ms", value="1"),
    TopicRecord(name="bar", topic_id=BAR),
    partition(BAR, 0, (LOCAL, 1)),
)


def delta_of(*records, image=ZOO_IMAGE, snapshot=False):
    delta = MetadataDelta(image, snapshot=snapshot)
    delta.replay_all(records)
    return delta


def change(pid, topic_id=ZOO, **fields):
    return PartitionChangeRecord(partition_id=pid, topic_id=topic_id, **fields)


# ---- contradictions -------------------------------------------------------------------------

@pytest.mark.parametrize(("record", "reason"), [
    (TopicRecord(name="zoo", topic_id=NEW), "topic name 'zoo' is already in use"),
    (TopicRecord(name="other", topic_id=ZOO), f"topic id {ZOO} is already in use"),
    (partition(NEW, 0, (1,)), f"no topic with id {NEW}"),
    (change(0, topic_id=NEW, leader=1), f"no topic with id {NEW}"),
    (change(9, leader=1), "topic 'zoo' has no partition 9"),
    (change(0, leader_recovery_state=7), "7 is not a valid leader recovery state"),
    (change(0, directories=(NEW,)), "1 directories for 3 replicas"),
    (RemoveTopicRecord(topic_id=NEW), f"no topic with id {NEW}"),
    (FenceBrokerRecord(id=7, epoch=1), "no broker 7 is registered"),
    (UnfenceBrokerRecord(id=1, epoch=9), "broker 1 is registered with epoch 10, not 9"),
    (UnregisterBrokerRecord(broker_id=1, broker_epoch=11), "with epoch 10, not 11"),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=2),
     "unknown value 2 for fenced"),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=-1),
     "unknown value -1 for in_controlled_shutdown"),
    (ConfigRecord(resource_type=3, resource_name="x", name="y", value="z"),
     "unknown resource type 3"),
    (FeatureLevelRecord(name="group.version", feature_level=-1), "never negative"),
])
def test_a_record_that_contradicts_the_image_raises_naming_it(record, reason):
    delta = MetadataDelta(ZOO_IMAGE)
    with pytest.raises(ImageError) as caught:
        delta.replay(record)
    assert caught.value.record is record
    assert repr(record) in str(caught.value) and reason in str(caught.value)
    assert delta.apply(ZOO_IMAGE.provenance) == ZOO_IMAGE  # the delta is unchanged


def test_a_dropped_delta_and_the_image_it_was_built_on_are_freed_without_the_collector():
    # A node replays one delta per batch and drops it: were a delta a reference cycle, it and
    # the image under it would wait for the cyclic collector's full passes.
    image = image_of(TopicRecord(name="zoo", topic_id=ZOO), partition(ZOO, 0, (1,)))
    delta = delta_of(change(0, leader=-1), RegisterBrokerRecord(broker_id=1, broker_epoch=5),
                     image=image)
    delta.apply(END)
    dropped = [weakref.ref(delta), weakref.ref(image)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        del delta, image
        assert [ref() for ref in dropped] == [None, None]
    finally:
        if enabled:
            gc.enable()


def test_producer_ids_only_go_up():
    delta = delta_of(ProducerIdsRecord(next_producer_id=1000))
    with pytest.raises(ImageError, match="must go up from 1000"):
        delta.replay(ProducerIdsRecord(next_producer_id=1000))
    delta.replay(ProducerIdsRecord(next_producer_id=2000))
    assert delta.apply(END).next_producer_id == 2000


def test_a_deleted_topics_name_may_be_reused_but_not_its_id():
    delta = delta_of(RemoveTopicRecord(topic_id=ZOO), TopicRecord(name="zoo", topic_id=NEW))
    with pytest.raises(ImageError, match="already in use"):
        delta.replay(TopicRecord(name="zoo2", topic_id=ZOO))
    image = delta.apply(END)
    assert image.topic("zoo").id == NEW and image.topic("zoo").partitions == {}
    assert image.topic_configs("zoo") == {}  # the configs went with the old topic


def test_a_topic_created_and_deleted_in_one_delta_leaves_no_trace():
    delta = delta_of(TopicRecord(name="tmp", topic_id=NEW), partition(NEW, 0, (LOCAL,)),
                     RemoveTopicRecord(topic_id=NEW))
    assert delta.apply(ZOO_IMAGE.provenance) == ZOO_IMAGE
    assert delta.deleted_topics == {}
    assert delta.local_changes(LOCAL).leaders == {}


def test_records_without_meaning_for_the_image_change_nothing():
    assert delta_of(NoOpRecord()).apply(ZOO_IMAGE.provenance) == ZOO_IMAGE


# ---- brokers ----------------------------------------------------------------------------------

def test_broker_registration_fencing_and_shutdown():
    delta = delta_of(UnfenceBrokerRecord(id=1, epoch=10))
    assert delta.broker(1).is_active
    delta.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                in_controlled_shutdown=1))
    broker = delta.apply(END).broker(1)
    assert not broker.fenced and broker.in_controlled_shutdown and not broker.is_active
    delta.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1))
    assert delta.broker(1).fenced and delta.broker(1).in_controlled_shutdown
    delta.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=12, rack="r", fenced=True))
    assert delta.broker(1).epoch == 12 and not delta.broker(1).in_controlled_shutdown
    delta.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=12))
    assert delta.apply(END).brokers == {}
    assert delta.changed_brokers == {1: None}


# ---- configs and features ---------------------------------------------------------------------

def test_configs_are_set_and_removed_by_key():
    image = delta_of(
        ConfigRecord(resource_type=2, resource_name="zoo", name="cleanup.policy", value="x"),
        ConfigRecord(resource_type=2, resource_name="zoo", name="retention.ms", value=None),
        ConfigRecord(resource_type=4, resource_name="1", name="a", value="b"),
        ConfigRecord(resource_type=4, resource_name="1", name="a", value=None),
    ).apply(END)
    assert image.topic_configs("zoo") == {"cleanup.policy": "x"}
    assert len(image.configs) == 1  # no empty broker resource is kept


def test_feature_level_zero_removes_a_feature_but_metadata_version():
    image = delta_of(FeatureLevelRecord(name="group.version", feature_level=1),
                     FeatureLevelRecord(name="metadata.version", feature_level=20)).apply(END)
    assert image.features == {"group.version": 1, "metadata.version": 20}
    image = delta_of(FeatureLevelRecord(name="group.version", feature_level=0),
                     FeatureLevelRecord(name="metadata.version", feature_level=0),
                     image=image).apply(END)
    assert image.features == {"metadata.version": 0}


# ---- local changes ----------------------------------------------------------------------------

def test_local_changes_of_leaders_followers_and_reassignments():
    delta = delta_of(
        change(0, leader=LOCAL),  # follower -> leader
        change(1, leader=1),  # leader -> follower
        change(2, isr=(0, 1, 2), replicas=(0, 1, 2)),  # follower -> not a replica
        change(3, leader=0, isr=(0, 1, 2), replicas=(0, 1, 2)),  # leader -> not a replica
        change(4, leader=LOCAL, isr=(LOCAL, 1, 2), replicas=(LOCAL, 1, 2)),  # -> leader
        change(5, isr=(0, 1, LOCAL), replicas=(0, 1, LOCAL)),  # -> follower
        change(0, topic_id=BAR, isr=(LOCAL,)),  # still the leader, ISR shrank
    )
    changes = delta.local_changes(LOCAL)
    zoo = lambda *pids: {TopicPartition("zoo", pid) for pid in pids}  # noqa: E731
    assert changes.deletes == zoo(2, 3)
    assert set(changes.elected_leaders) == zoo(0, 4)
    assert set(changes.leaders) == zoo(0, 4) | {TopicPartition("bar", 0)}
    assert set(changes.followers) == zoo(1, 5)
    assert changes.topic_ids == {"zoo": ZOO, "bar": BAR}
    assert changes.leaders[TopicPartition("zoo", 4)].partition.leader_epoch == 1
    assert changes.leaders[TopicPartition("zoo", 4)].topic_id == ZOO


def test_a_deleted_topic_is_deleted_locally_even_after_changes():
    changes = delta_of(change(1, leader=1), RemoveTopicRecord(topic_id=ZOO)).local_changes(LOCAL)
    assert changes.deletes == {TopicPartition("zoo", pid) for pid in (0, 1, 2, 3)}
    assert changes.leaders == {} and changes.followers == {}
    assert changes.deleted_topics == {ZOO: "zoo"}


def test_new_topics_and_partitions_are_new_leaders_and_followers():
    changes = delta_of(
        TopicRecord(name="baz", topic_id=NEW),
        partition(NEW, 0, (LOCAL, 1)),
        partition(NEW, 1, (4, LOCAL), epoch=2),
        partition(NEW, 2, (4, 5)),
        partition(BAR, 1, (1, LOCAL)),  # CreatePartitions
    ).local_changes(LOCAL)
    assert set(changes.elected_leaders) == {TopicPartition("baz", 0)}
    assert set(changes.followers) == {TopicPartition("baz", 1), TopicPartition("bar", 1)}


def test_a_snapshot_reports_only_what_differs_from_the_image_before_it():
    records = [r for r in ZOO_IMAGE.to_records() if getattr(r, "topic_id", None) != BAR]
    records = [partition(ZOO, 1, (1, LOCAL), epoch=4)
               if getattr(record, "partition_id", None) == 1 else record for record in records]
    delta = delta_of(*records, snapshot=True)
    changes = delta.local_changes(LOCAL)
    assert changes.deletes == {TopicPartition("bar", 0)}
    assert set(changes.followers) == {TopicPartition("zoo", 1)}
    assert changes.leaders == {}
    assert delta.deleted_topics == {BAR: "bar"}


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 40), st.integers(1, 30),
       st.integers(1, 5))
def test_local_changes_account_for_every_hosted_partition(rng, before_steps, steps, broker):
    log = history(rng, before_steps + steps)
    before = replay_records(MetadataImage.EMPTY, log[:before_steps], END)
    delta = delta_of(*log[before_steps:], image=before)
    after = delta.apply(END)
    changes = delta.local_changes(broker)

    def hosted(image):
        return {(TopicPartition(topic.name, pid), topic.id): part
                for topic in image.topics.values() for pid, part in topic.partitions.items()
                if broker in part.replicas}

    old, new = hosted(before), hosted(after)
    assert changes.deletes == {key[0] for key in old.keys() - new.keys()}
    for key, part in new.items():
        moved = key not in old or old[key].partition_epoch != part.partition_epoch
        target = changes.leaders if part.leader == broker else changes.followers
        assert (key[0] in target) == moved
        if moved:
            assert target[key[0]].partition == part
    assert set(changes.elected_leaders) <= set(changes.leaders)


def test_a_delta_replayed_from_a_random_history_never_raises():
    for seed in range(20):
        log = history(random.Random(seed), 80)
        delta_of(*log, image=MetadataImage.EMPTY).apply(END)
