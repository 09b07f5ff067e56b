"""Prometheus metrics of a node's metadata quorum replica, its controller and the metadata it
has applied: gauges read at scrape time, and a histogram of how long the quorum was without a
known leader.

Names follow Kafka's: the raft metrics (`kafka.server:type=raft-metrics`: current-state,
current-leader, current-epoch, current-vote, high-watermark, log-end-offset, election latency),
the controller's (`kafka.controller:type=KafkaController`: ActiveControllerCount,
GlobalTopicCount, GlobalPartitionCount, OfflinePartitionsCount,
PreferredReplicaImbalanceCount, ActiveBrokerCount, FencedBrokerCount,
LastAppliedRecordOffset, LastCommittedRecordOffset) and the broker's metadata loader
(`broker-metadata-metrics`: last-applied-record-offset, metadata-load-error-count). The
cluster-wide controller gauges are reported by the active controller only, so a sum over the
cluster counts every topic, partition and broker once — as Kafka's do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily

from spark_log.metadata.image import MetadataImage
from spark_log.raft.quorum_state import Candidate, Follower, Leader, Resigned, Unattached

# Kafka's raft current-state values, in the order it lists them.
RAFT_STATES = ("leader", "candidate", "voted", "follower", "unattached", "observer",
               "resigned")
_ELECTION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60)


class QuorumReplica(Protocol):
    """The node's quorum replica (RaftReplica), as the gauges read it."""

    node_id: int
    is_voter: bool
    high_watermark: int
    state: Leader | Candidate | Follower | Unattached | Resigned

    @property
    def epoch(self) -> int: ...

    @property
    def leader_id(self) -> int: ...


class LoadedMetadata(Protocol):
    """The node's metadata loader, as the gauges read it."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def offset(self) -> int: ...

    @property
    def error(self) -> object | None: ...


@dataclass(frozen=True, slots=True)
class QuorumState:
    """The parts of a node the quorum gauges read: its replica (None before the quorum starts
    and after it stops), its loaded metadata, and whether its controller is the active one
    (always False on a broker-only node)."""

    replica: Callable[[], QuorumReplica | None]
    log_end_offset: Callable[[], int]
    loaded: LoadedMetadata
    controller_active: Callable[[], bool]
    is_controller: bool


def raft_state(replica: QuorumReplica) -> str:
    """Kafka's name of the replica's state: an observer is a non-voter that follows."""
    state = replica.state
    if isinstance(state, Leader):
        return "leader"
    if isinstance(state, Candidate):
        return "candidate"
    if isinstance(state, Resigned):
        return "resigned"
    if not replica.is_voter:
        return "observer"
    if isinstance(state, Follower):
        return "follower"
    return "voted" if state.voted_id >= 0 else "unattached"


def _voted_for(replica: QuorumReplica) -> int:
    state = replica.state
    if isinstance(state, Leader | Candidate):
        return replica.node_id
    return getattr(state, "voted_id", -1)


def quorum_metrics(node: QuorumState) -> Iterable[GaugeMetricFamily]:
    """Every quorum, controller and metadata gauge, computed now (on the node's event loop)."""
    yield from _raft_metrics(node)
    yield from _metadata_metrics(node)
    if node.is_controller:
        yield from _controller_metrics(node)


def _raft_metrics(node: QuorumState) -> Iterator[GaugeMetricFamily]:
    replica = node.replica()
    if replica is None:
        return
    state = GaugeMetricFamily("spark_log_raft_current_state", "This replica's state in the "
                              "metadata quorum (1 for the state it is in).", labels=["state"])
    current = raft_state(replica)
    for name in RAFT_STATES:
        state.add_metric([name], int(name == current))
    yield state
    yield GaugeMetricFamily("spark_log_raft_current_leader", "The quorum leader this replica "
                            "knows (-1: none).", value=replica.leader_id)
    yield GaugeMetricFamily("spark_log_raft_current_epoch", "The quorum epoch this replica is "
                            "in.", value=replica.epoch)
    yield GaugeMetricFamily("spark_log_raft_current_vote", "The voter this replica voted for in "
                            "the current epoch (-1: none).", value=_voted_for(replica))
    yield GaugeMetricFamily("spark_log_raft_high_watermark", "Offset after the last committed "
                            "record of the metadata log, as this replica knows it.",
                            value=replica.high_watermark)
    yield GaugeMetricFamily("spark_log_raft_log_end_offset", "Offset after the last record of "
                            "this replica's metadata log.", value=node.log_end_offset())


def _metadata_metrics(node: QuorumState) -> Iterator[GaugeMetricFamily]:
    yield GaugeMetricFamily("spark_log_metadata_last_applied_record_offset", "Offset of the "
                            "last metadata record this node applied.", value=node.loaded.offset)
    yield GaugeMetricFamily("spark_log_metadata_load_errors", "1 when the node stopped "
                            "applying the metadata log at a record it could not apply.",
                            value=int(node.loaded.error is not None))


def _controller_metrics(node: QuorumState) -> Iterator[GaugeMetricFamily]:
    active = node.controller_active()
    yield GaugeMetricFamily("spark_log_controller_active", "1 on the active controller.",
                            value=int(active))
    if not active:
        return  # cluster-wide counts come from the active controller alone
    image = node.loaded.image
    partitions = [p for topic in image.topics.values() for p in topic.partitions.values()]
    brokers = image.brokers.values()
    fenced = sum(1 for b in brokers if b.fenced)
    replica = node.replica()
    committed = replica.high_watermark - 1 if replica is not None else -1
    for name, text, value in (
            ("global_topics", "Topics in the cluster.", len(image.topics)),
            ("global_partitions", "Partitions in the cluster.", len(partitions)),
            ("offline_partitions", "Partitions without a leader.",
             sum(1 for p in partitions if p.leader < 0)),
            ("preferred_replica_imbalance", "Partitions not led by their first replica.",
             sum(1 for p in partitions if p.replicas and p.leader != p.replicas[0])),
            ("active_brokers", "Registered brokers that are not fenced.", len(brokers) - fenced),
            ("fenced_brokers", "Registered brokers that are fenced.", fenced),
            ("last_committed_record_offset", "Offset of the last committed metadata record.",
             committed)):
        yield GaugeMetricFamily(f"spark_log_controller_{name}", text, value=value)


class ElectionTimer:
    """Observes, in `spark_log_raft_election_seconds`, each span in which the node knew no
    quorum leader: from losing one (or starting) to learning the next.

    Invariant: at most one span is open; a span closes only when a leader becomes known.
    """

    def __init__(self, registry: CollectorRegistry, now_s: Callable[[], float]) -> None:
        self.now_s = now_s
        self.histogram = Histogram("spark_log_raft_election_seconds", "Time the metadata "
                                   "quorum had no leader this node knew of.",
                                   buckets=_ELECTION_BUCKETS, registry=registry)
        self._since: float | None = now_s()

    def leader_changed(self, leader: int) -> None:
        if leader < 0:
            if self._since is None:
                self._since = self.now_s()
        elif self._since is not None:
            self.histogram.observe(self.now_s() - self._since)
            self._since = None
