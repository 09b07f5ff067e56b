"""The records a change of a broker's state calls for (Kafka's ReplicationControlManager
handleBrokerFenced, handleBrokerUnfenced, handleBrokerInControlledShutdown,
handleBrokerUnregistered and generateLeaderAndIsrUpdates): a broker leaving (fenced, shutting
down, unregistered, or replaced by a new incarnation) leaves every ISR it is in — but as the
last member — and every leadership, a new leader being elected from the rest; a broker being
unfenced may lead the partitions left without a leader. Elections are unclean where the topic
allows it (`unclean.leader.election.enable`); the partitions so elected are reported.

Partitions are visited by topic name and partition id, so the records are deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from uuid import UUID

from spark_log.metadata import (
    NO_LEADER,
    MetadataImage,
    MetadataRecord,
    PartitionChangeResult,
    PartitionRegistration,
    TopicPartition,
    change_for_broker_joining,
    change_for_broker_leaving,
)
from spark_log.metadata.records import BrokerRegistrationChangeRecord, UnregisterBrokerRecord

from .controller_settings import ControllerSettings
from .topic_configs import unclean_leader_election_enabled

__all__ = [
    "Changes",
    "enter_controlled_shutdown",
    "fence_broker",
    "has_leaderships",
    "leave_partitions",
    "unfence_broker",
    "unregister_broker_records",
]

FENCE = 1  # BrokerRegistrationChangeRecord.fenced
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1


@dataclass
class Changes:
    """Records accumulated for one decision, and the partitions elected uncleanly."""

    records: list[MetadataRecord] = field(default_factory=list)
    unclean: list[TopicPartition] = field(default_factory=list)

    def add_change(self, topic: str, partition_id: int,
                   result: PartitionChangeResult | None) -> None:
        if result is None:
            return
        self.records.append(result.record)
        if result.unclean:
            self.unclean.append(TopicPartition(topic, partition_id))


def _partitions(image: MetadataImage, wanted: Callable[[PartitionRegistration], bool]
                ) -> Iterator[tuple[str, UUID, int, PartitionRegistration]]:
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            if wanted(partition):
                yield name, topic.id, partition_id, partition


def _unclean_by_topic(image: MetadataImage, settings: ControllerSettings
                      ) -> Callable[[str], bool]:
    """Each topic's `unclean.leader.election.enable`, resolved once for one decision (not for
    each of its partitions: a broker of 10,000 partitions starting resolved it 10,000 times)."""
    return functools.cache(lambda name: unclean_leader_election_enabled(image, settings, name))


def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    """Whether `broker_id` leads any partition."""
    return any(partition.leader == broker_id
               for topic in image.topics.values() for partition in topic.partitions.values())


def leave_partitions(image: MetadataImage, settings: ControllerSettings, broker_id: int,
                     changes: Changes) -> None:
    """`broker_id` leaves the ISR (unless last) and the leadership of every partition whose ISR
    holds it."""
    unclean = _unclean_by_topic(image, settings)
    for name, topic_id, partition_id, partition in _partitions(
            image, lambda p: broker_id in p.isr):
        changes.add_change(name, partition_id, change_for_broker_leaving(
            topic_id, partition_id, partition, image.brokers, broker_id, unclean(name)))


def fence_broker(image: MetadataImage, settings: ControllerSettings,
                 broker_id: int) -> Changes:
    """Leadership moves off `broker_id`, then the registration change fencing it."""
    broker = image.brokers[broker_id]
    changes = Changes()
    leave_partitions(image, settings, broker_id, changes)
    changes.records.append(BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=broker.epoch, fenced=FENCE))
    return changes


def unfence_broker(image: MetadataImage, settings: ControllerSettings,
                   broker_id: int) -> Changes:
    """The registration change unfencing `broker_id`, then elections for the partitions
    without a leader, where it may now lead — unless its registration is still in controlled
    shutdown (a broker fenced at the end of one, heartbeating on): a registration never leaves
    that state, so the broker may not lead (Kafka would elect it, leaving partitions led by a
    broker it does not count as active)."""
    broker = image.brokers[broker_id]
    changes = Changes([BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=broker.epoch, fenced=UNFENCE)])
    if broker.in_controlled_shutdown:
        return changes
    unclean = _unclean_by_topic(image, settings)
    for name, topic_id, partition_id, partition in _partitions(
            image, lambda p: p.leader == NO_LEADER):
        changes.add_change(name, partition_id, change_for_broker_joining(
            topic_id, partition_id, partition, image.brokers, broker_id, unclean(name)))
    return changes


def enter_controlled_shutdown(image: MetadataImage, settings: ControllerSettings,
                              broker_id: int) -> Changes:
    """The registration change marking `broker_id` in controlled shutdown (unless it is
    already), then its leaderships moved off."""
    broker = image.brokers[broker_id]
    changes = Changes()
    if not broker.in_controlled_shutdown:
        changes.records.append(BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=broker.epoch,
            in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN))
    leave_partitions(image, settings, broker_id, changes)
    return changes


def unregister_broker_records(image: MetadataImage, settings: ControllerSettings,
                              broker_id: int) -> Changes:
    """Leadership moves off `broker_id`, then its UnregisterBrokerRecord."""
    broker = image.brokers[broker_id]
    changes = Changes()
    leave_partitions(image, settings, broker_id, changes)
    changes.records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch))
    return changes
