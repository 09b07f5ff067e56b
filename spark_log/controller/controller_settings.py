"""The controller's settings its decisions read, under Kafka's config names and with Kafka's
defaults: the cluster id brokers must match, topic defaults (num.partitions,
default.replication.factor, static topic-level log defaults), broker sessions, leader elections
and rebalancing, topic deletion, and when to take a metadata snapshot.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["ControllerSettings"]


def _frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class ControllerSettings:
    """Static settings of the active controller.

    Invariants: read-only (`topic_defaults` is a read-only mapping); `topic_defaults` holds
    topic-level names (`retention.ms`, not `log.retention.ms`) with property-string values, the
    broker's static defaults for every topic (`unclean.leader.election.enable` among them).
    """

    cluster_id: str
    node_id: int = -1  # node.id of this controller (its own dynamic configs apply to topics)
    controller_ids: frozenset[int] = frozenset()  # the quorum's voters
    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    broker_session_timeout_ms: int = 9000  # broker.session.timeout.ms
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage
    max_elections_per_imbalance: int = 1000  # Kafka's MAX_ELECTIONS_PER_IMBALANCE
    delete_topic_enable: bool = True  # delete.topic.enable
    topic_defaults: Mapping[str, str] = field(default_factory=_frozen)
    broker_list_configs: frozenset[str] = frozenset({"log.cleanup.policy"})  # LIST-typed
    # metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms
    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    max_snapshot_interval_ms: int = 3_600_000
    # On a combined node: the incarnation of the broker in this controller's own process. A
    # registration of it replaces the node's earlier incarnation without waiting for that
    # one's session: the process that held it is gone (this one holds the node's locks).
    local_broker_incarnation: uuid.UUID | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic_defaults", _frozen(self.topic_defaults))

    __hash__ = None  # type: ignore[assignment]  # holds a mapping
