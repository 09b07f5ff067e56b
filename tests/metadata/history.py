"""Random but valid histories of a cluster's metadata log, for property tests: brokers register,
are fenced, unfenced, shut down and leave; topics are created with partitions, change leaders,
ISRs and replicas, and are deleted; configs, feature levels and producer-id blocks change.

Each record is valid against the records before it, so replaying a history never raises. Topic
names are never used twice, so partitions named in LocalReplicaChanges are unambiguous.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from spark_log.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
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

BROKER_IDS = range(1, 6)


@dataclass
class _Model:
    rng: random.Random
    brokers: dict[int, int] = field(default_factory=dict)  # id -> epoch
    topics: dict[uuid.UUID, tuple[str, dict[int, tuple[int, ...]]]] = field(default_factory=dict)
    names: int = 0
    epoch: int = 0
    next_producer_id: int = 0
    uuids: int = 0

    def uuid(self) -> uuid.UUID:
        """A fresh id: random high bits, a counter in the low ones."""
        self.uuids += 1
        return uuid.UUID(int=self.rng.getrandbits(64) << 64 | self.uuids)

    def register(self) -> list[MetadataRecord]:
        broker_id = self.rng.choice(BROKER_IDS)
        self.epoch += 1
        self.brokers[broker_id] = self.epoch
        return [RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=self.uuid(), broker_epoch=self.epoch,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host=f"b{broker_id}", port=9092),),
            rack=self.rng.choice([None, "r1", "r2"]), fenced=self.rng.random() < 0.5)]

    def broker_change(self) -> list[MetadataRecord]:
        if not self.brokers:
            return self.register()
        broker_id = self.rng.choice(sorted(self.brokers))
        epoch = self.brokers[broker_id]
        kind = self.rng.randrange(4)
        if kind == 0:
            return [FenceBrokerRecord(id=broker_id, epoch=epoch)]
        if kind == 1:
            return [UnfenceBrokerRecord(id=broker_id, epoch=epoch)]
        if kind == 2:
            return [BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=epoch, fenced=self.rng.choice([-1, 0, 1]),
                in_controlled_shutdown=self.rng.choice([0, 1]))]
        del self.brokers[broker_id]
        return [UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)]

    def replicas(self) -> tuple[int, ...]:
        return tuple(self.rng.sample(list(BROKER_IDS), self.rng.randint(1, 3)))

    def create_topic(self) -> list[MetadataRecord]:
        self.names += 1
        topic_id, name = self.uuid(), f"t{self.names}"
        partitions = {pid: self.replicas() for pid in range(self.rng.randint(1, 3))}
        self.topics[topic_id] = (name, partitions)
        records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
        if self.rng.random() < 0.5:
            records.append(ConfigRecord(resource_type=2, resource_name=name,
                                        name="retention.ms", value=str(self.rng.randrange(99))))
        records.extend(PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas,
                                       isr=replicas, leader=replicas[0], leader_epoch=0,
                                       partition_epoch=0)
                       for pid, replicas in partitions.items())
        return records

    def change_partition(self) -> list[MetadataRecord]:
        if not self.topics:
            return self.create_topic()
        topic_id = self.rng.choice(sorted(self.topics))
        partitions = self.topics[topic_id][1]
        pid = self.rng.choice(sorted(partitions))
        replicas = self.replicas() if self.rng.random() < 0.3 else None
        current = replicas or partitions[pid]
        partitions[pid] = current
        isr = tuple(self.rng.sample(current, self.rng.randint(1, len(current))))
        leader = self.rng.choice([-2, -1, *isr])
        if self.rng.random() < 0.2:
            pid = max(partitions) + 1  # a new partition (CreatePartitions)
            partitions[pid] = current
            return [PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=current,
                                    isr=current, leader=current[0], leader_epoch=0,
                                    partition_epoch=0)]
        return [PartitionChangeRecord(partition_id=pid, topic_id=topic_id, replicas=replicas,
                                      isr=isr if self.rng.random() < 0.7 else None,
                                      leader=leader)]

    def remove_topic(self) -> list[MetadataRecord]:
        if not self.topics:
            return self.create_topic()
        topic_id = self.rng.choice(sorted(self.topics))
        del self.topics[topic_id]
        return [RemoveTopicRecord(topic_id=topic_id)]

    def other(self) -> list[MetadataRecord]:
        kind = self.rng.randrange(4)
        if kind == 0:
            self.next_producer_id += self.rng.randint(1, 1000)
            return [ProducerIdsRecord(broker_id=1, broker_epoch=1,
                                      next_producer_id=self.next_producer_id)]
        if kind == 1:
            return [FeatureLevelRecord(name=self.rng.choice(["metadata.version", "kraft.version",
                                                             "group.version"]),
                                       feature_level=self.rng.randrange(3))]
        if kind == 2:
            return [ConfigRecord(resource_type=4, resource_name=str(self.rng.choice(BROKER_IDS)),
                                 name="log.retention.ms",
                                 value=self.rng.choice([None, "1", "2"]))]
        return [NoOpRecord()]


def history(rng: random.Random, steps: int) -> list[MetadataRecord]:
    """A valid metadata log of about `steps` changes."""
    model = _Model(rng)
    actions = [model.register, model.broker_change, model.create_topic,
               model.change_partition, model.change_partition, model.remove_topic, model.other]
    records: list[MetadataRecord] = [FeatureLevelRecord(name="metadata.version", feature_level=20)]
    for _ in range(steps):
        records.extend(rng.choice(actions)())
    return records
