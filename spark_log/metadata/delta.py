"""Building the next image from the records after an image (Kafka's MetadataDelta): records are
replayed in log order, each checked against the image as the records before it left it, then
`apply` makes the new image. A snapshot is loaded the same way with `snapshot=True`: its
records replace the image whole.

    delta = MetadataDelta(image)
    for record in committed_records:
        delta.replay(record)            # ImageError, naming the record, if it contradicts
    image = delta.apply(Provenance(last_offset, last_epoch))
    changes = delta.local_changes(my_broker_id)   # partitions to lead, follow, delete

Metadata transactions (Begin/End/AbortTransactionRecord) are the loader's concern: it replays
the records of a transaction once its end is committed, and drops an aborted one; here those
markers, NoOpRecord, ZkMigrationStateRecord and RegisterControllerRecord change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any
from uuid import UUID

from .broker_registration import BrokerRegistration
from .errors import ImageError
from .image import METADATA_VERSION, ConfigResource, ConfigResourceType, MetadataImage, Provenance
from .local_changes import LocalReplicaChanges
from .records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    ZkMigrationStateRecord,
)
from .topics_delta import TopicsDelta

__all__ = ["MetadataDelta", "load_snapshot", "replay_records"]

_FENCING = {1: True, 0: None, -1: False}  # BrokerRegistrationChangeRecord.fenced
_SHUTDOWN = {1: True, 0: None}  # BrokerRegistrationChangeRecord.in_controlled_shutdown
_IGNORED = (NoOpRecord, ZkMigrationStateRecord, BeginTransactionRecord, EndTransactionRecord,
            AbortTransactionRecord, RegisterControllerRecord)


class MetadataDelta:
    """The changes records make to `image`.

    Invariants: replaying a record either applies it whole or raises `ImageError` and changes
    nothing, so the delta still describes the records before it. Lookups see `image` as the
    records replayed so far changed it (a snapshot delta sees none of `image`). `image` itself
    is never changed; `apply` may be called more than once.
    """

    def __init__(self, image: MetadataImage, *, snapshot: bool = False) -> None:
        self.image = image
        self.snapshot = snapshot
        self.topics = TopicsDelta(image.topics, snapshot, image.topics_by_name)
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._features: dict[str, int | None] = {}
        self._configs: dict[ConfigResource, dict[str, str | None]] = {}
        self._cleared_configs: set[ConfigResource] = set()
        self._next_producer_id: int | None = None

    def replay(self, record: MetadataRecord) -> None:
        """Apply one record (the next in log order) to the delta."""
        handler = _REPLAY.get(type(record))
        if handler is not None:
            handler(self, record)
        elif not isinstance(record, _IGNORED):
            raise ImageError(record, "not a metadata record the image knows")

    def replay_all(self, records: Iterable[MetadataRecord]) -> None:
        for record in records:
            self.replay(record)

    def replay_image(self, image: MetadataImage) -> None:
        """Replay `image.to_records()`, with each topic's partitions taken as they are rather
        than written as records and read back (the same delta: a registration is immutable
        and was checked when it was first replayed). A new publisher's first image holds
        every partition of the cluster."""
        self.replay_all(image.records_before_topics())
        for name in sorted(image.topics_by_name):
            self.topics.replay_topic_image(image.topics_by_name[name])
        self.replay_all(image.records_after_topics())

    # ---- brokers --------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration as the records so far left it."""
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return None if self.snapshot else self.image.brokers.get(broker_id)

    def _current(self, record: Any, broker_id: int, epoch: int) -> BrokerRegistration:
        broker = self.broker(broker_id)
        if broker is None:
            raise ImageError(record, f"no broker {broker_id} is registered")
        if broker.epoch != epoch:
            raise ImageError(record, f"broker {broker_id} is registered with epoch "
                                     f"{broker.epoch}, not {epoch}")
        return broker

    def _register_broker(self, record: RegisterBrokerRecord) -> None:
        self._brokers[record.broker_id] = BrokerRegistration.from_record(record)

    def _unregister_broker(self, record: UnregisterBrokerRecord) -> None:
        self._current(record, record.broker_id, record.broker_epoch)
        self._brokers[record.broker_id] = None

    def _fence_broker(self, record: FenceBrokerRecord) -> None:
        broker = self._current(record, record.id, record.epoch)
        self._brokers[record.id] = broker.with_changes(fenced=True)

    def _unfence_broker(self, record: UnfenceBrokerRecord) -> None:
        broker = self._current(record, record.id, record.epoch)
        self._brokers[record.id] = broker.with_changes(fenced=False)

    def _change_broker(self, record: BrokerRegistrationChangeRecord) -> None:
        broker = self._current(record, record.broker_id, record.broker_epoch)
        if record.fenced not in _FENCING:
            raise ImageError(record, f"unknown value {record.fenced} for fenced")
        if record.in_controlled_shutdown not in _SHUTDOWN:
            raise ImageError(record, f"unknown value {record.in_controlled_shutdown} for "
                                     "in_controlled_shutdown")
        self._brokers[record.broker_id] = broker.with_changes(
            fenced=_FENCING[record.fenced],
            in_controlled_shutdown=_SHUTDOWN[record.in_controlled_shutdown],
            log_dirs=record.log_dirs or None)

    # ---- topics and configs -----------------------------------------------------------------

    def _remove_topic(self, record: RemoveTopicRecord) -> None:
        name = self.topics.replay_remove_topic(record)
        resource = ConfigResource(ConfigResourceType.TOPIC, name)
        self._configs.pop(resource, None)
        self._cleared_configs.add(resource)

    def _config(self, record: ConfigRecord) -> None:
        try:
            resource_type = ConfigResourceType(record.resource_type)
        except ValueError:
            raise ImageError(record, f"unknown resource type {record.resource_type}") from None
        resource = ConfigResource(resource_type, record.resource_name)
        self._configs.setdefault(resource, {})[record.name] = record.value

    # ---- features and producer ids ----------------------------------------------------------

    def _feature_level(self, record: FeatureLevelRecord) -> None:
        if record.feature_level < 0:
            raise ImageError(record, "a feature level is never negative")
        removed = record.feature_level == 0 and record.name != METADATA_VERSION
        self._features[record.name] = None if removed else record.feature_level

    def next_producer_id(self) -> int:
        if self._next_producer_id is not None:
            return self._next_producer_id
        return -1 if self.snapshot else self.image.next_producer_id

    def _producer_ids(self, record: ProducerIdsRecord) -> None:
        current = self.next_producer_id()
        if current >= 0 and record.next_producer_id <= current:
            raise ImageError(record, f"the next producer id must go up from {current}")
        self._next_producer_id = record.next_producer_id

    # ---- results ----------------------------------------------------------------------------

    @property
    def changed_brokers(self) -> Mapping[int, BrokerRegistration | None]:
        """Brokers registered, changed (or, as None, unregistered) by the records so far."""
        return MappingProxyType(dict(self._brokers))

    @property
    def deleted_topics(self) -> Mapping[UUID, str]:
        return self.topics.deleted_topics

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """What the records so far change for `broker_id` (see `LocalReplicaChanges`)."""
        return self.topics.local_changes(broker_id)

    def apply(self, provenance: Provenance) -> MetadataImage:
        """The image after the records replayed so far; `provenance` is the offset and epoch of
        the last of them."""
        base = MetadataImage.EMPTY if self.snapshot else self.image
        return MetadataImage(
            provenance=provenance,
            features=_overlay(base.features, self._features),
            brokers=_overlay(base.brokers, self._brokers),
            topics=self.topics.apply(),
            configs=self._apply_configs(base.configs),
            next_producer_id=self.next_producer_id(),
        )

    def _apply_configs(self, before: Mapping[ConfigResource, Mapping[str, str]]
                       ) -> dict[ConfigResource, Mapping[str, str]]:
        configs = {resource: values for resource, values in before.items()
                   if resource not in self._cleared_configs}
        for resource, changes in self._configs.items():
            values = _overlay(configs.get(resource, {}), changes)
            if values:
                configs[resource] = values
            else:
                configs.pop(resource, None)
        return configs


# One table for every delta, never a table of each delta's bound methods: that made each delta a
# reference cycle, and with it the image it was built on, freed only by the cyclic collector's
# full passes (a start of 10,000 partitions left 130,000 partition registrations to them).
_REPLAY: dict[type, Callable[[MetadataDelta, Any], None]] = {
    RegisterBrokerRecord: MetadataDelta._register_broker,
    UnregisterBrokerRecord: MetadataDelta._unregister_broker,
    FenceBrokerRecord: MetadataDelta._fence_broker,
    UnfenceBrokerRecord: MetadataDelta._unfence_broker,
    BrokerRegistrationChangeRecord: MetadataDelta._change_broker,
    TopicRecord: lambda delta, record: delta.topics.replay_topic(record),
    PartitionRecord: lambda delta, record: delta.topics.replay_partition(record),
    PartitionChangeRecord: lambda delta, record: delta.topics.replay_partition_change(record),
    RemoveTopicRecord: MetadataDelta._remove_topic,
    ConfigRecord: MetadataDelta._config,
    FeatureLevelRecord: MetadataDelta._feature_level,
    ProducerIdsRecord: MetadataDelta._producer_ids,
}


def _overlay(before: Mapping[Any, Any], changes: Mapping[Any, Any]) -> dict[Any, Any]:
    """`before` with `changes` applied, a change to None removing its key."""
    merged = dict(before)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def replay_records(image: MetadataImage, records: Iterable[MetadataRecord],
                   provenance: Provenance) -> MetadataImage:
    """`image` with `records` applied, the last of them at `provenance`."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply(provenance)


def load_snapshot(records: Iterable[MetadataRecord], provenance: Provenance) -> MetadataImage:
    """The image a snapshot's records describe (the snapshot ends at `provenance`)."""
    delta = MetadataDelta(MetadataImage.EMPTY, snapshot=True)
    delta.replay_all(records)
    return delta.apply(provenance)
