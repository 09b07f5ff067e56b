"""The metadata image: what a node knows of the cluster after applying the metadata log up to
some offset (Kafka's MetadataImage) — registered brokers, topics by name and by id with their
partitions, configs by resource, finalized feature levels, the next producer-id block, and the
offset and epoch of the last record applied. Images are immutable; a `MetadataDelta` (see
`delta`) turns one into the next. `to_records()` writes an image as the records a snapshot
holds, in Kafka's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple
from uuid import UUID

from .broker_registration import BrokerRegistration
from .partition_registration import PartitionRegistration
from .records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    ProducerIdsRecord,
    TopicRecord,
)

__all__ = [
    "METADATA_VERSION",
    "ConfigResource",
    "ConfigResourceType",
    "MetadataImage",
    "Provenance",
    "TopicImage",
]

METADATA_VERSION = "metadata.version"  # the feature whose level says which records may appear


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids, as ConfigRecords carry them."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigResource(NamedTuple):
    """A resource configs belong to; a broker's name is its id, "" for cluster defaults."""

    type: ConfigResourceType
    name: str


class Provenance(NamedTuple):
    """The offset and epoch of the last record an image contains; (-1, -1) for none."""

    offset: int
    epoch: int


NO_PROVENANCE = Provenance(-1, -1)


def _frozen(mapping: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class TopicImage:
    """A topic: its name, id, and partitions by partition id (read-only)."""

    name: str
    id: UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=_frozen)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _frozen(self.partitions))

    __hash__ = None  # type: ignore[assignment]  # holds a mapping

    def to_records(self) -> list[MetadataRecord]:
        """The TopicRecord, then a PartitionRecord per partition in partition order."""
        records: list[MetadataRecord] = [TopicRecord(name=self.name, topic_id=self.id)]
        records.extend(self.partitions[pid].to_record(self.id, pid)
                       for pid in sorted(self.partitions))
        return records


@dataclass(frozen=True)
class MetadataImage:
    """The cluster as of `provenance`.

    Invariants: every mapping is read-only; `topics` (by id) and `topics_by_name` hold the same
    topics, one per name and one per id; `configs` holds no empty resource; `features` holds no
    level 0 except METADATA_VERSION's; `next_producer_id` is -1 until a block is handed out.
    """

    EMPTY: ClassVar[MetadataImage]

    provenance: Provenance = NO_PROVENANCE
    features: Mapping[str, int] = field(default_factory=_frozen)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_frozen)
    topics: Mapping[UUID, TopicImage] = field(default_factory=_frozen)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_frozen)
    next_producer_id: int = -1
    topics_by_name: Mapping[str, TopicImage] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("features", "brokers", "topics"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        configs = {resource: _frozen(values) for resource, values in self.configs.items()}
        object.__setattr__(self, "configs", _frozen(configs))
        by_name = {topic.name: topic for topic in self.topics.values()}
        if len(by_name) != len(self.topics):
            raise ValueError("two topics share a name")
        object.__setattr__(self, "topics_by_name", _frozen(by_name))

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    @property
    def metadata_version(self) -> int | None:
        """The finalized metadata.version feature level, if one was recorded."""
        return self.features.get(METADATA_VERSION)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        image = self.topics_by_name.get(topic)
        return None if image is None else image.partitions.get(partition)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get(ConfigResource(ConfigResourceType.TOPIC, topic), _EMPTY_MAP)

    @property
    def is_empty(self) -> bool:
        """Whether `to_records` is empty (without building the records)."""
        return not (self.features or self.brokers or self.topics or self.next_producer_id >= 0
                    or any(self.configs.values()))

    def to_records(self) -> list[MetadataRecord]:
        """The records that rebuild this image, as a snapshot of it holds them: feature levels
        (metadata.version first), brokers, topics with their partitions, configs, the
        producer-id block."""
        records = self.records_before_topics()
        for name in sorted(self.topics_by_name):
            records.extend(self.topics_by_name[name].to_records())
        records.extend(self.records_after_topics())
        return records

    def records_before_topics(self) -> list[MetadataRecord]:
        """The feature levels (metadata.version first) and brokers of `to_records`."""
        records: list[MetadataRecord] = []
        for name in sorted(self.features, key=lambda name: (name != METADATA_VERSION, name)):
            records.append(FeatureLevelRecord(name=name, feature_level=self.features[name]))
        records.extend(self.brokers[bid].to_record() for bid in sorted(self.brokers))
        return records

    def records_after_topics(self) -> list[MetadataRecord]:
        """The configs and the producer-id block of `to_records`."""
        records: list[MetadataRecord] = []
        for resource in sorted(self.configs):
            values = self.configs[resource]
            records.extend(
                ConfigRecord(resource_type=int(resource.type), resource_name=resource.name,
                             name=key, value=values[key])
                for key in sorted(values))
        if self.next_producer_id >= 0:
            records.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                             next_producer_id=self.next_producer_id))
        return records


_EMPTY_MAP: Mapping[str, str] = MappingProxyType({})
MetadataImage.EMPTY = MetadataImage()
