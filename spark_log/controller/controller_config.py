"""The active controller's settings read from the node's `BrokerConfig`: the `ControllerSettings`
its decisions read (`settings_from`) and the intervals of its periodic work
(`ControllerTimings`, `timings_from`), under Kafka's names and with Kafka's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_log.node_config.broker_config import BrokerConfig

from .controller_settings import ControllerSettings
from .topic_configs import UNCLEAN_LEADER_ELECTION_ENABLE

__all__ = ["ControllerTimings", "settings_from", "timings_from"]

# Kafka's QuorumController checks for leaderless partitions to elect uncleanly every 5 minutes.
UNCLEAN_ELECTION_CHECK_INTERVAL_MS = 300_000


@dataclass(frozen=True)
class ControllerTimings:
    """How often the active controller does its periodic work (milliseconds).

    Invariant: every interval is positive.
    """

    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds
    unclean_election_check_interval_ms: int = UNCLEAN_ELECTION_CHECK_INTERVAL_MS

    def __post_init__(self) -> None:
        if min(self.leader_imbalance_check_interval_ms,
               self.unclean_election_check_interval_ms) <= 0:
            raise ValueError(f"controller intervals must be positive: {self}")


def settings_from(config: BrokerConfig, cluster_id: str) -> ControllerSettings:
    """The settings of the controller on the node `config` describes, for cluster `cluster_id`
    (the id in the node's meta.properties)."""
    topic_defaults = config.topic_defaults()
    if "unclean.leader.election.enable" in config.values:
        enabled = config.get("unclean.leader.election.enable")
        topic_defaults[UNCLEAN_LEADER_ELECTION_ENABLE] = "true" if enabled else "false"
    return ControllerSettings(
        cluster_id=cluster_id,
        node_id=config.node_id,
        controller_ids=config.quorum_config().voters,
        num_partitions=config.get("num.partitions"),
        default_replication_factor=config.get("default.replication.factor"),
        broker_session_timeout_ms=config.get("broker.session.timeout.ms"),
        auto_leader_rebalance_enable=config.get("auto.leader.rebalance.enable"),
        leader_imbalance_per_broker_percentage=config.get(
            "leader.imbalance.per.broker.percentage"),
        delete_topic_enable=config.get("delete.topic.enable"),
        topic_defaults=topic_defaults,
        max_record_bytes_between_snapshots=config.get(
            "metadata.log.max.record.bytes.between.snapshots"),
        max_snapshot_interval_ms=config.get("metadata.log.max.snapshot.interval.ms"),
    )


def timings_from(config: BrokerConfig) -> ControllerTimings:
    """The intervals of the controller's periodic work on the node `config` describes."""
    return ControllerTimings(
        leader_imbalance_check_interval_ms=config.get(
            "leader.imbalance.check.interval.seconds") * 1000)
