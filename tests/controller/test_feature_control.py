"""Feature levels as Kafka's FeatureControlManager and activation write them: the bootstrap
records of a new cluster, the finalized levels, and the version each record is written at."""

from __future__ import annotations

import pytest

from spark_log.controller.controller_result import ControllerError
from spark_log.controller.feature_control import (
    IBP_3_6_IV2,
    bootstrap_records,
    finalized_features,
    record_version,
    registration_features,
)
from spark_log.metadata import MetadataImage, Provenance, replay_records
from spark_log.metadata.records import (
    BeginTransactionRecord,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ZkMigrationStateRecord,
)
from spark_log.protocol import ErrorCode


def test_a_new_cluster_starts_at_3_6_iv2_in_a_bootstrap_transaction() -> None:
    records = bootstrap_records()
    assert records == [
        BeginTransactionRecord(name="Bootstrap records"),
        FeatureLevelRecord(name="metadata.version", feature_level=IBP_3_6_IV2),
        ZkMigrationStateRecord(zk_migration_state=0),
        EndTransactionRecord(),
    ]
    image = replay_records(MetadataImage.EMPTY, records, Provenance(3, 1))
    assert image.metadata_version == 14


def test_older_levels_bootstrap_without_a_transaction_and_other_features_follow() -> None:
    assert bootstrap_records(7, {"group.version": 1, "off.version": 0}) == [
        FeatureLevelRecord(name="metadata.version", feature_level=7),
        FeatureLevelRecord(name="group.version", feature_level=1),
    ]
    assert bootstrap_records(8)[-1] == ZkMigrationStateRecord(zk_migration_state=0)


def test_a_log_without_a_metadata_version_is_at_the_first_kraft_level() -> None:
    assert finalized_features(MetadataImage.EMPTY) == {"metadata.version": 1}


@pytest.mark.parametrize(("requested", "finalized", "message"), [
    ([("metadata.version", 1, 7)], {}, "does not support finalized version 14 of "
     "metadata.version. The broker wants a version between 1 and 7, inclusive."),
    ([], {}, "finalized version 14 of metadata.version. The broker wants a version between 1 "
             "and 1, inclusive."),
    ([("metadata.version", 1, 14)], {"group.version": 1},
     "finalized version 1 of group.version. The broker wants a version between 0 and 0"),
    ([("metadata.version", 1, 14), ("x.version", 1, 2)], {}, "finalized version 0 of x.version"),
])
def test_a_broker_missing_a_finalized_level_is_refused_with_kafkas_message(
        requested: list[tuple[str, int, int]], finalized: dict[str, int], message: str) -> None:
    with pytest.raises(ControllerError) as refused:
        registration_features(requested, {"metadata.version": 14, **finalized})
    assert refused.value.code == ErrorCode.unsupported_version
    assert message in str(refused.value)
    assert str(refused.value).startswith("Unable to register because the broker does not")


def test_registration_features_list_the_broker_ranges() -> None:
    features = registration_features([("metadata.version", 1, 20), ("group.version", 0, 1)],
                                     {"metadata.version": 14, "group.version": 1})
    assert features == (
        BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=20),
        BrokerFeature(name="group.version", min_supported_version=0, max_supported_version=1))
    with pytest.raises(ControllerError) as refused:
        registration_features([("metadata.version", 15, 20)], {"metadata.version": 14})
    assert refused.value.code == ErrorCode.unsupported_version


@pytest.mark.parametrize(("record", "level", "version"), [
    (RegisterBrokerRecord(), 14, 2), (RegisterBrokerRecord(), 7, 1), (RegisterBrokerRecord(), 6, 0),
    (RegisterBrokerRecord(), 17, 3), (PartitionRecord(), 14, 0), (PartitionRecord(), 17, 1),
    (PartitionChangeRecord(), 23, 2), (ConfigRecord(), 14, 0),
    (BrokerRegistrationChangeRecord(fenced=1), 14, 0),
    (BrokerRegistrationChangeRecord(in_controlled_shutdown=1), 14, 1),
])
def test_records_are_written_at_kafkas_version_for_the_level(record: object, level: int,
                                                            version: int) -> None:
    assert record_version(record, level) == version  # type: ignore[arg-type]
