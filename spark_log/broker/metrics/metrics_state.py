"""Scrape-time gauges of a broker's state, for `BrokerMetrics.add_state`: log size, start and
end offsets per partition, under-replicated partitions per topic, consumer group committed
offsets and lag per partition, open transactions, active connections and offline log
directories; of the partitions this broker leads, those under-replicated and under
min.insync.replicas.

Read from the broker's own structures when Prometheus scrapes, on the event loop that serves
`/metrics` (see `metrics_server`), so nothing is computed on the produce and fetch paths and no
lock is needed. Names follow Kafka's JMX metrics (Log Size/LogStartOffset/LogEndOffset,
ReplicaManager UnderReplicatedPartitions, SocketServer connection count) and kafka-exporter's
consumer group lag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import GaugeMetricFamily

from spark_log.broker.transaction.transaction_metadata import TransactionMetadata, TxnState

if TYPE_CHECKING:
    from spark_log.broker.group.group_requests import GroupDescription
    from spark_log.storage.log.log_manager import LogManager

OPEN_TXN_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                             TxnState.PREPARE_EPOCH_FENCE})
_PARTITION = ["topic", "partition"]
_GROUP_PARTITION = ["group", "topic", "partition"]


class DescribedGroups(Protocol):
    """The group coordinator, as the gauges read it."""

    def group_ids(self) -> list[str]: ...

    def describe_group(self, group_id: str) -> GroupDescription | None: ...


class OpenTransactions(Protocol):
    """The transaction coordinator, as the gauges read it."""

    @property
    def transactions(self) -> Mapping[str, TransactionMetadata]: ...


class LedPartition(Protocol):
    """A partition this broker leads, as the replication gauges read it."""

    topic: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int


@dataclass(frozen=True, slots=True)
class BrokerState:
    """The parts of a broker the state gauges read."""

    logs: LogManager
    groups: DescribedGroups
    transactions: OpenTransactions
    connection_count: Callable[[], int]
    led_partitions: Callable[[], Iterable[LedPartition]] = tuple


def broker_state_metrics(broker: BrokerState) -> Iterable[GaugeMetricFamily]:
    """Every state gauge, computed now. Call on the broker's event loop only."""
    yield from _log_metrics(broker)
    yield from _under_replicated(broker)
    yield from _group_metrics(broker)
    yield _open_transactions(broker)
    yield GaugeMetricFamily("spark_log_active_connections", "Open client connections.",
                            value=broker.connection_count())
    yield GaugeMetricFamily("spark_log_offline_log_directories", "Log directories taken "
                            "offline by a storage error (their partitions are unavailable).",
                            value=int(broker.logs.failure.failed))


def _log_metrics(broker: BrokerState) -> Iterator[GaugeMetricFamily]:
    size = GaugeMetricFamily("spark_log_log_size_bytes", "Bytes of a partition's log segments.",
                             labels=_PARTITION)
    start = GaugeMetricFamily("spark_log_log_start_offset", "First offset of a partition.",
                              labels=_PARTITION)
    end = GaugeMetricFamily("spark_log_log_end_offset", "Offset after a partition's last "
                            "record.", labels=_PARTITION)
    logs = [] if broker.logs.failure.failed else broker.logs.logs()  # offline: none readable
    for log in logs:
        labels = [log.topic, str(log.partition)]
        size.add_metric(labels, log.size_bytes)
        start.add_metric(labels, log.log_start_offset)
        end.add_metric(labels, log.log_end_offset)
    yield from (size, start, end)


def _under_replicated(broker: BrokerState) -> Iterator[GaugeMetricFamily]:
    """Of the partitions this broker leads, per topic: those whose ISR is smaller than their
    replica set (Kafka's UnderReplicatedPartitions), and those whose ISR is below
    min.insync.replicas, refusing acks=all (UnderMinIsrPartitionCount). Every topic with a log
    here is listed, at 0 when none."""
    under = GaugeMetricFamily("spark_log_under_replicated_partitions",
                              "Partitions led here with fewer in-sync replicas than replicas.",
                              labels=["topic"])
    under_min = GaugeMetricFamily("spark_log_under_min_isr_partitions",
                                  "Partitions led here whose ISR is below min.insync.replicas.",
                                  labels=["topic"])
    counts = {log.topic: [0, 0] for log in broker.logs.logs()}
    for led in broker.led_partitions():
        count = counts.setdefault(led.topic, [0, 0])
        count[0] += len(led.isr) < len(led.replicas)
        count[1] += len(led.isr) < led.min_insync_replicas
    for topic in sorted(counts):
        under.add_metric([topic], counts[topic][0])
        under_min.add_metric([topic], counts[topic][1])
    yield from (under, under_min)


def _group_metrics(broker: BrokerState) -> Iterator[GaugeMetricFamily]:
    committed = GaugeMetricFamily("spark_log_consumer_group_committed_offset",
                                  "A consumer group's committed offset.",
                                  labels=_GROUP_PARTITION)
    lag = GaugeMetricFamily("spark_log_consumer_group_lag",
                            "Records between a group's committed offset and the high "
                            "watermark.", labels=_GROUP_PARTITION)
    for group_id in broker.groups.group_ids():
        described = broker.groups.describe_group(group_id)
        if described is None:
            continue
        for (topic, partition), entry in sorted(described.offsets.items()):
            log = broker.logs.get(topic, partition)
            labels = [group_id, topic, str(partition)]
            committed.add_metric(labels, entry.offset)
            if log is not None and not log.failed:
                lag.add_metric(labels, max(0, log.high_watermark - entry.offset))
    yield from (committed, lag)


def _open_transactions(broker: BrokerState) -> GaugeMetricFamily:
    count = sum(1 for t in broker.transactions.transactions.values()
                if t.state in OPEN_TXN_STATES)
    return GaugeMetricFamily("spark_log_open_transactions",
                             "Transactions begun and not yet completed.", value=count)
