"""Feature levels as the controller decides them (Kafka's FeatureControlManager, BootstrapMetadata
and ActivationRecordsGenerator): the metadata.version a new cluster starts at, the records the
first active controller writes to an empty log, the finalized levels a registering broker must
support, and the version Kafka writes each record at for a metadata.version.

The cluster runs at metadata.version 3.6-IV2 (feature level 14), the level whose records are the
ones written here: broker registrations at version 2 (no log directories), partition records and
changes at version 0 (no directory assignment, no eligible leader replicas), registration changes
and metadata transactions (KIP-868) as 3.6 writes them, ISR shrinks that keep the leader epoch.
Later levels need directory assignment (3.7-IV2) or controller registration (3.7-IV0), which
this cluster does not do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_log.metadata import MetadataImage, MetadataRecord
from spark_log.metadata.image import METADATA_VERSION
from spark_log.metadata.records import (
    BeginTransactionRecord,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ZkMigrationStateRecord,
)
from spark_log.protocol import ErrorCode

from .controller_result import ControllerError

__all__ = [
    "IBP_3_6_IV2",
    "METADATA_VERSION",
    "MINIMUM_KRAFT_VERSION",
    "bootstrap_records",
    "finalized_features",
    "record_version",
    "registration_features",
]

MINIMUM_KRAFT_VERSION = 1  # 3.0-IV1: what a broker naming no metadata.version range supports
IBP_3_3_IV2 = 6  # BrokerRegistrationChangeRecord
IBP_3_3_IV3 = 7  # in_controlled_shutdown in registrations
IBP_3_4_IV0 = 8  # ZK migration state (written as NONE by a new cluster)
IBP_3_6_IV1 = 13  # metadata transactions
IBP_3_6_IV2 = 14  # the level this cluster runs at
IBP_3_7_IV2 = 17  # directory assignment
IBP_4_0_IV1 = 23  # eligible leader replicas
BOOTSTRAP_TRANSACTION = "Bootstrap records"


def bootstrap_records(metadata_version: int = IBP_3_6_IV2,
                      features: Mapping[str, int] | None = None) -> list[MetadataRecord]:
    """What the first active controller appends to an empty metadata log: the metadata.version
    level, other feature levels above 0 by name, and (3.4+) the ZK migration state NONE, inside
    a metadata transaction from 3.6-IV1 on, as Kafka's activation writes them."""
    records: list[MetadataRecord] = []
    transactional = metadata_version >= IBP_3_6_IV1
    if transactional:
        records.append(BeginTransactionRecord(name=BOOTSTRAP_TRANSACTION))
    records.append(FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version))
    others = features or {}
    for name in sorted(others):
        if name != METADATA_VERSION and others[name] > 0:
            records.append(FeatureLevelRecord(name=name, feature_level=others[name]))
    if metadata_version >= IBP_3_4_IV0:
        records.append(ZkMigrationStateRecord(zk_migration_state=0))
    if transactional:
        records.append(EndTransactionRecord())
    return records


def finalized_features(image: MetadataImage) -> dict[str, int]:
    """The finalized feature levels: the image's, metadata.version at 3.0-IV1 when no level was
    ever recorded (a log from before FeatureLevelRecord)."""
    features = dict(image.features)
    features.setdefault(METADATA_VERSION, MINIMUM_KRAFT_VERSION)
    return features


def registration_features(requested: Iterable[tuple[str, int, int]],
                          finalized: Mapping[str, int]) -> tuple[BrokerFeature, ...]:
    """The features a RegisterBrokerRecord lists for a broker announcing `requested` (name, min,
    max) ranges. Raises ControllerError(UNSUPPORTED_VERSION) with Kafka's message when a range
    misses the finalized level (0 for a feature not finalized), when the broker names no
    metadata.version range and the cluster is past 3.0-IV1, or when it does not name a feature
    finalized above 0."""
    features = [_checked(name, low, high, finalized) for name, low, high in requested]
    named = {feature.name for feature in features}
    if METADATA_VERSION not in named:
        features.append(_checked(METADATA_VERSION, MINIMUM_KRAFT_VERSION, MINIMUM_KRAFT_VERSION,
                                 finalized))
    for name, level in sorted(finalized.items()):
        if level != 0 and name not in named and name != METADATA_VERSION:
            _checked(name, 0, 0, finalized)
    return tuple(features)


def _checked(name: str, low: int, high: int, finalized: Mapping[str, int]) -> BrokerFeature:
    default = MINIMUM_KRAFT_VERSION if name == METADATA_VERSION else 0
    level = finalized.get(name, default)
    if not low <= level <= high:
        raise ControllerError(
            ErrorCode.unsupported_version,
            f"Unable to register because the broker does not support finalized version {level} "
            f"of {name}. The broker wants a version between {low} and {high}, inclusive.")
    return BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)


def record_version(record: MetadataRecord, metadata_version: int = IBP_3_6_IV2) -> int:
    """The version Kafka writes `record` at under `metadata_version` (MetadataVersion's
    registerBrokerRecordVersion, partitionRecordVersion, partitionChangeRecordVersion, and the
    lowest BrokerRegistrationChangeRecord version holding its fields); 0 for the rest."""
    if isinstance(record, RegisterBrokerRecord):
        thresholds = ((IBP_3_7_IV2, 3), (IBP_3_4_IV0, 2), (IBP_3_3_IV3, 1))
        return next((v for level, v in thresholds if metadata_version >= level), 0)
    if isinstance(record, PartitionRecord | PartitionChangeRecord):
        thresholds = ((IBP_4_0_IV1, 2), (IBP_3_7_IV2, 1))
        return next((v for level, v in thresholds if metadata_version >= level), 0)
    if isinstance(record, BrokerRegistrationChangeRecord):
        if record.log_dirs:
            return 2
        return 1 if record.in_controlled_shutdown else 0
    return 0
