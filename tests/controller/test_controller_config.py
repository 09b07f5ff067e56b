"""The controller's settings and timings read from a node's settings under Kafka's names."""

from __future__ import annotations

import pytest

from spark_log.controller.controller_config import ControllerTimings, settings_from, timings_from
from spark_log.node_config.broker_config import BrokerConfig


def test_settings_come_from_the_node_config_under_kafkas_names() -> None:
    config = BrokerConfig.from_properties({
        "node.id": "2", "num.partitions": "4", "default.replication.factor": "3",
        "broker.session.timeout.ms": "1234", "auto.leader.rebalance.enable": "false",
        "leader.imbalance.per.broker.percentage": "25", "delete.topic.enable": "false",
        "unclean.leader.election.enable": "true", "log.retention.hours": "1",
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "metadata.log.max.snapshot.interval.ms": "0",
        "leader.imbalance.check.interval.seconds": "7"})
    settings = settings_from(config, "cluster-a")
    assert (settings.cluster_id, settings.node_id, settings.controller_ids) == \
        ("cluster-a", 2, frozenset({2}))
    assert (settings.num_partitions, settings.default_replication_factor,
            settings.broker_session_timeout_ms) == (4, 3, 1234)
    assert not settings.auto_leader_rebalance_enable and not settings.delete_topic_enable
    assert settings.leader_imbalance_per_broker_percentage == 25
    assert settings.topic_defaults["unclean.leader.election.enable"] == "true"
    assert settings.topic_defaults["retention.ms"] == "3600000"
    assert (settings.max_record_bytes_between_snapshots,
            settings.max_snapshot_interval_ms) == (4096, 0)
    assert timings_from(config) == ControllerTimings(leader_imbalance_check_interval_ms=7000)


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.from_properties({"node.id": "1"})
    settings = settings_from(config, "c")
    assert "unclean.leader.election.enable" not in settings.topic_defaults
    assert (settings.broker_session_timeout_ms, settings.max_snapshot_interval_ms) == \
        (9000, 3_600_000)
    assert timings_from(config) == ControllerTimings(300_000, 300_000)


def test_intervals_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        ControllerTimings(leader_imbalance_check_interval_ms=0)
