"""The records of the `__cluster_metadata` log, as Kafka defines them
(`metadata/src/main/resources/common/metadata/*.json`): names, api keys, versions, fields in
schema order and Kafka's defaults, so `SomeRecord()` equals Kafka's `new SomeRecord()`.

Each class holds the fields of its highest version (`HIGHEST_VERSION`); `since` in a field's
wire description says which versions have it. Arrays are tuples; a UUID Kafka leaves unset is
the zero UUID (Kafka's `Uuid.ZERO_UUID`, also `DirectoryId.MIGRATING`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar
from uuid import UUID

from .schema import wire

__all__ = [
    "RECORD_TYPES",
    "ZERO_UUID",
    "AbortTransactionRecord",
    "BeginTransactionRecord",
    "BrokerEndpoint",
    "BrokerFeature",
    "BrokerRegistrationChangeRecord",
    "ConfigRecord",
    "ControllerEndpoint",
    "ControllerFeature",
    "EndTransactionRecord",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RegisterControllerRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "ZkMigrationStateRecord",
]

ZERO_UUID = UUID(int=0)

_record = dataclass(frozen=True, slots=True, kw_only=True)


# ---- brokers and controllers ----------------------------------------------------------------

@_record
class BrokerEndpoint:
    """A listener of a broker: where clients and other brokers reach it."""

    name: str = wire("string", "")
    host: str = wire("string", "")
    port: int = wire("uint16", 0)
    security_protocol: int = wire("int16", 0)


@_record
class BrokerFeature:
    """A feature a broker supports, with its range of levels."""

    name: str = wire("string", "")
    min_supported_version: int = wire("int16", 0)
    max_supported_version: int = wire("int16", 0)


@_record
class RegisterBrokerRecord:
    """A broker joined (or rejoined, with a new epoch) the cluster."""

    API_KEY: ClassVar[int] = 0
    HIGHEST_VERSION: ClassVar[int] = 3
    broker_id: int = wire("int32", 0)
    is_migrating_zk_broker: bool = wire("bool", False, since=2)
    incarnation_id: UUID = wire("uuid", ZERO_UUID)
    broker_epoch: int = wire("int64", 0)
    end_points: tuple[BrokerEndpoint, ...] = wire("[]struct", (), struct=BrokerEndpoint)
    features: tuple[BrokerFeature, ...] = wire("[]struct", (), struct=BrokerFeature)
    rack: str | None = wire("string", "", nullable=True)
    fenced: bool = wire("bool", True)
    in_controlled_shutdown: bool = wire("bool", False, since=1)
    log_dirs: tuple[UUID, ...] = wire("[]uuid", (), since=3, tag=0)


@_record
class UnregisterBrokerRecord:
    """A broker left the cluster."""

    API_KEY: ClassVar[int] = 1
    HIGHEST_VERSION: ClassVar[int] = 0
    broker_id: int = wire("int32", 0)
    broker_epoch: int = wire("int64", 0)


@_record
class FenceBrokerRecord:
    """A broker is fenced: it may not lead and is taken out of every ISR."""

    API_KEY: ClassVar[int] = 7
    HIGHEST_VERSION: ClassVar[int] = 0
    id: int = wire("int32", 0)
    epoch: int = wire("int64", 0)


@_record
class UnfenceBrokerRecord:
    """A broker is unfenced: it caught up with the metadata log and may lead again."""

    API_KEY: ClassVar[int] = 8
    HIGHEST_VERSION: ClassVar[int] = 0
    id: int = wire("int32", 0)
    epoch: int = wire("int64", 0)


@_record
class BrokerRegistrationChangeRecord:
    """A change to a registered broker: `fenced` is -1 (unfenced), 0 (no change) or 1 (fenced);
    `in_controlled_shutdown` 0 (no change) or 1; `log_dirs` empty when they did not change."""

    API_KEY: ClassVar[int] = 17
    HIGHEST_VERSION: ClassVar[int] = 2
    broker_id: int = wire("int32", 0)
    broker_epoch: int = wire("int64", 0)
    fenced: int = wire("int8", 0, tag=0)
    in_controlled_shutdown: int = wire("int8", 0, since=1, tag=1)
    log_dirs: tuple[UUID, ...] = wire("[]uuid", (), since=2, tag=2)


@_record
class ControllerEndpoint:
    """A listener of a controller."""

    name: str = wire("string", "")
    host: str = wire("string", "")
    port: int = wire("uint16", 0)
    security_protocol: int = wire("int16", 0)


@_record
class ControllerFeature:
    """A feature a controller supports, with its range of levels."""

    name: str = wire("string", "")
    min_supported_version: int = wire("int16", 0)
    max_supported_version: int = wire("int16", 0)


@_record
class RegisterControllerRecord:
    """A controller registered its endpoints and features."""

    API_KEY: ClassVar[int] = 27
    HIGHEST_VERSION: ClassVar[int] = 0
    controller_id: int = wire("int32", 0)
    incarnation_id: UUID = wire("uuid", ZERO_UUID)
    zk_migration_ready: bool = wire("bool", False)
    end_points: tuple[ControllerEndpoint, ...] = wire("[]struct", (), struct=ControllerEndpoint)
    features: tuple[ControllerFeature, ...] = wire("[]struct", (), struct=ControllerFeature)


# ---- topics and partitions ------------------------------------------------------------------

@_record
class TopicRecord:
    """A topic was created."""

    API_KEY: ClassVar[int] = 2
    HIGHEST_VERSION: ClassVar[int] = 0
    name: str = wire("string", "")
    topic_id: UUID = wire("uuid", ZERO_UUID)


@_record
class PartitionRecord:
    """A partition's whole state: created, or written out in a snapshot."""

    API_KEY: ClassVar[int] = 3
    HIGHEST_VERSION: ClassVar[int] = 2
    partition_id: int = wire("int32", -1)
    topic_id: UUID = wire("uuid", ZERO_UUID)
    replicas: tuple[int, ...] = wire("[]int32", ())
    isr: tuple[int, ...] = wire("[]int32", ())
    removing_replicas: tuple[int, ...] = wire("[]int32", ())
    adding_replicas: tuple[int, ...] = wire("[]int32", ())
    leader: int = wire("int32", -1)
    leader_recovery_state: int = wire("int8", 0, tag=0)
    leader_epoch: int = wire("int32", -1)
    partition_epoch: int = wire("int32", -1)
    directories: tuple[UUID, ...] = wire("[]uuid", (), since=1)
    eligible_leader_replicas: tuple[int, ...] | None = wire(
        "[]int32", None, since=2, tag=1, nullable=True)
    last_known_elr: tuple[int, ...] | None = wire("[]int32", None, since=2, tag=2, nullable=True)


@_record
class PartitionChangeRecord:
    """A change to a partition. Every field left at its default did not change: None for the
    lists, -2 (NO_LEADER_CHANGE) for the leader, -1 for the leader recovery state."""

    API_KEY: ClassVar[int] = 5
    HIGHEST_VERSION: ClassVar[int] = 2
    partition_id: int = wire("int32", -1)
    topic_id: UUID = wire("uuid", ZERO_UUID)
    isr: tuple[int, ...] | None = wire("[]int32", None, tag=0, nullable=True)
    leader: int = wire("int32", -2, tag=1)
    replicas: tuple[int, ...] | None = wire("[]int32", None, tag=2, nullable=True)
    removing_replicas: tuple[int, ...] | None = wire("[]int32", None, tag=3, nullable=True)
    adding_replicas: tuple[int, ...] | None = wire("[]int32", None, tag=4, nullable=True)
    leader_recovery_state: int = wire("int8", -1, tag=5)
    directories: tuple[UUID, ...] | None = wire("[]uuid", None, since=1, tag=8, nullable=True)
    eligible_leader_replicas: tuple[int, ...] | None = wire(
        "[]int32", None, since=2, tag=6, nullable=True)
    last_known_elr: tuple[int, ...] | None = wire("[]int32", None, since=2, tag=7, nullable=True)


@_record
class RemoveTopicRecord:
    """A topic was deleted, with all its partitions."""

    API_KEY: ClassVar[int] = 9
    HIGHEST_VERSION: ClassVar[int] = 0
    topic_id: UUID = wire("uuid", ZERO_UUID)


# ---- configs, features, producer ids --------------------------------------------------------

@_record
class ConfigRecord:
    """A config of a resource (a topic, a broker, ...) was set, or removed when `value` is
    None. `resource_type` is Kafka's ConfigResource.Type id (2 topic, 4 broker)."""

    API_KEY: ClassVar[int] = 4
    HIGHEST_VERSION: ClassVar[int] = 0
    resource_type: int = wire("int8", 0)
    resource_name: str = wire("string", "")
    name: str = wire("string", "")
    value: str | None = wire("string", "", nullable=True)


@_record
class FeatureLevelRecord:
    """A feature's finalized level; level 0 removes a feature (metadata.version excepted)."""

    API_KEY: ClassVar[int] = 12
    HIGHEST_VERSION: ClassVar[int] = 0
    name: str = wire("string", "")
    feature_level: int = wire("int16", 0)


@_record
class ProducerIdsRecord:
    """A block of producer ids was handed out; the next block starts at `next_producer_id`."""

    API_KEY: ClassVar[int] = 15
    HIGHEST_VERSION: ClassVar[int] = 0
    broker_id: int = wire("int32", 0)
    broker_epoch: int = wire("int64", -1)
    next_producer_id: int = wire("int64", 0)


@_record
class ZkMigrationStateRecord:
    """The ZooKeeper migration state (0: none). Written by Kafka's bootstrap; never changes
    here."""

    API_KEY: ClassVar[int] = 21
    HIGHEST_VERSION: ClassVar[int] = 0
    zk_migration_state: int = wire("int8", 0)


# ---- markers --------------------------------------------------------------------------------

@_record
class NoOpRecord:
    """Nothing: the active controller writes it to advance the log (and the high watermark)."""

    API_KEY: ClassVar[int] = 20
    HIGHEST_VERSION: ClassVar[int] = 0


@_record
class BeginTransactionRecord:
    """Starts records that must be applied together, across batches (KIP-868)."""

    API_KEY: ClassVar[int] = 23
    HIGHEST_VERSION: ClassVar[int] = 0
    name: str | None = wire("string", None, tag=0, nullable=True)


@_record
class EndTransactionRecord:
    """Ends a metadata transaction: its records take effect together."""

    API_KEY: ClassVar[int] = 24
    HIGHEST_VERSION: ClassVar[int] = 0


@_record
class AbortTransactionRecord:
    """Ends a metadata transaction whose records are to be dropped."""

    API_KEY: ClassVar[int] = 25
    HIGHEST_VERSION: ClassVar[int] = 0
    reason: str | None = wire("string", None, tag=0, nullable=True)


MetadataRecord = (
    RegisterBrokerRecord | UnregisterBrokerRecord | TopicRecord | PartitionRecord | ConfigRecord
    | PartitionChangeRecord | FenceBrokerRecord | UnfenceBrokerRecord | RemoveTopicRecord
    | FeatureLevelRecord | ProducerIdsRecord | BrokerRegistrationChangeRecord | NoOpRecord
    | ZkMigrationStateRecord | BeginTransactionRecord | EndTransactionRecord
    | AbortTransactionRecord | RegisterControllerRecord
)

RECORD_TYPES: Mapping[int, type[MetadataRecord]] = MappingProxyType({
    cls.API_KEY: cls
    for cls in (
        RegisterBrokerRecord, UnregisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
        PartitionChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, RemoveTopicRecord,
        FeatureLevelRecord, ProducerIdsRecord, BrokerRegistrationChangeRecord, NoOpRecord,
        ZkMigrationStateRecord, BeginTransactionRecord, EndTransactionRecord,
        AbortTransactionRecord, RegisterControllerRecord,
    )
})
