"""The broker role of a node: its logs, the metadata it serves from, its partitions' leadership,
its coordinators and its client listener, assembled, started and stopped as a unit. The only
module that builds the concrete coordinators and managers: each part receives the narrow
collaborators it uses, and request handlers reach them through `Services`.

`open()` loads the logs (recovering them after a crash) and subscribes to the metadata, before
the quorum replays the log, so each image applied finds the logs open. `start()` binds the
client listener, registers with the controller and waits until it is unfenced (caught up with
the metadata), then starts the coordinators and serves. `stop()` is the clean shutdown: a
controlled shutdown first (its leaderships move away while it still serves), then stop
accepting, finish in-flight requests, flush and checkpoint every log, write the clean-shutdown
marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol
from uuid import UUID

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.cluster.broker_channel import BrokerChannel
from spark_log.broker.cluster.broker_lifecycle import BrokerLifecycle, ListenerEndpoint
from spark_log.broker.cluster.controller_channel import ControllerChannel
from spark_log.broker.cluster.metadata_cache import MetadataCache
from spark_log.broker.cluster.metadata_publisher import MetadataPublisher
from spark_log.broker.group.group_coordinator import GroupCoordinator
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.metrics.broker_metrics import BrokerMetrics
from spark_log.broker.replication.alter_partition_manager import AlterPartitionManager
from spark_log.broker.replication.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from spark_log.broker.replication.replica_manager import ReplicaManager, ReplicationSettings
from spark_log.broker.replication.replication_quota import ReplicationQuotas
from spark_log.broker.server.dispatcher import Dispatcher
from spark_log.broker.server.handlers import load_all
from spark_log.broker.server.listener import Listener
from spark_log.broker.server.services import Services
from spark_log.broker.topics.topic_manager import TopicManager
from spark_log.broker.transaction.producer_id_manager import ProducerIdManager
from spark_log.broker.transaction.transaction_coordinator import TransactionCoordinator
from spark_log.broker.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from spark_log.clock import Clock
from spark_log.metadata import MetadataDelta, MetadataImage
from spark_log.metadata.metadata_topic import METADATA_TOPIC
from spark_log.protocol import ApiSet
from spark_log.storage.cleaner.cleaner_config import CleanerConfig
from spark_log.storage.cleaner.cleaner_transactions import TRANSACTIONAL_BATCH_POLICY
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.record_checks import RECORD_TIMESTAMP_SEARCH, validate_records

log = logging.getLogger(__name__)

FLUSH_CHECK_INTERVAL_MS = 1000
SHUTDOWN_GRACE_S = 5  # how long requests in hand may take to finish at shutdown


class MetadataSource(Protocol):
    """The metadata loader: each new image, in log order, and how far it has applied."""

    @property
    def offset(self) -> int: ...

    async def wait_for_offset(self, offset: int, timeout: float | None = None) -> object: ...

    def add_publisher(self, publisher: Callable[[MetadataDelta, MetadataImage], None]
                      ) -> None: ...


class Broker:
    """The broker role. Everything but the metrics scrape runs on one asyncio event loop, so no
    component needs locks. Invariant: the client listener accepts connections only once this
    broker is unfenced, so every request sees metadata at least as new as its registration."""

    def __init__(self, config: BrokerConfig, clock: Clock, cluster_id: str,
                 channel: ControllerChannel, new_dir: bool, incarnation_id: uuid.UUID) -> None:
        self.config, self.clock, self.cluster_id = config, clock, cluster_id
        self.incarnation_id = incarnation_id  # this process's registration (the node's)
        self.node_id = config.node_id
        data_dir = config.data_dir
        assert data_dir is not None, "log.dirs must be set"
        self.data_dir: Path = data_dir
        self.channel, self.new_dir = channel, new_dir
        self.metrics = BrokerMetrics()
        client = config.broker_listeners[0]
        self.listener_name = client.name
        self.host, self.port = client.host, client.port
        self.advertised_host, self.advertised_port = client.advertised_host, client.port
        self.listener = Listener(self.host, self.port, config.get("socket.request.max.bytes"))
        self.cache = MetadataCache()
        self._tasks: list[asyncio.Task[None]] = []

    # ---- lifecycle ------------------------------------------------------------------------
    def open(self, metadata: MetadataSource) -> None:
        """Load the logs and build the parts; the metadata images are applied from the
        registration on (`start`)."""
        self.metadata = metadata
        self.producer_ids = ProducerIdManager(self.channel.call, self.node_id,
                                              lambda: self.lifecycle.epoch)
        self.logs = LogManager(str(self.data_dir), clock=self.clock,
                               default_config=TopicManager.topic_defaults(self.config),
                               record_search=RECORD_TIMESTAMP_SEARCH,
                               record_validator=validate_records, new_dir=self.new_dir,
                               checked_at_start=INTERNAL_TOPICS,
                               ignored_topics=frozenset({METADATA_TOPIC}))
        self.topics = TopicManager(self.config, self.cache, self.channel, self.logs,
                                   self._internal_replication)
        self.replicas = ReplicaManager(
            self.logs, self.node_id, self.clock,
            ReplicationSettings(self.config.get("replica.lag.time.max.ms")))
        quotas = ReplicationQuotas(self.node_id, lambda: self.cache.image,
                                   lambda: self.clock.monotonic_ms() / 1000)
        self.fetchers = ReplicaFetcherManager(
            self.node_id, self.replicas,
            lambda broker: self.cache.endpoint(broker, self.listener_name),
            FetcherSettings.from_broker(self.config.get), quotas)
        self.isr_changes = AlterPartitionManager(
            self.node_id, self.channel.call, lambda: self.lifecycle.epoch, self._topic_id,
            self.replicas)
        self.replicas.followers = self.fetchers
        self.replicas.isr_changes = self.isr_changes
        self.replicas.quotas = quotas
        self.cleaner = LogCleaner(self.logs, CleanerConfig.from_broker(self.config.get),
                                  clock=self.clock,
                                  last_stable_offset=self.replicas.last_stable_offset,
                                  batch_policy=TRANSACTIONAL_BATCH_POLICY)
        self.groups = GroupCoordinator(self.config, self.clock, self.topics, self.replicas)
        self.brokers = BrokerChannel(self.node_id, self.cache, self.listener_name)
        self.transactions = TransactionCoordinator(self.config, self.clock, self.topics,
                                                   self.replicas, self.groups, self.producer_ids,
                                                   self.node_id, self.brokers)
        self.publisher = MetadataPublisher(self.node_id, self.cache, self.logs, self.replicas,
                                           self.topics.config_for)
        self.publisher.on_topics_deleted += [self.groups.on_topics_deleted,
                                             self.metrics.forget_topics]
        self.publisher.on_elected.append(self._coordinator_elected)
        self.publisher.on_resigned.append(self._coordinator_resigned)

    async def start(self) -> None:
        bound_host, self.port = await self.listener.bind()
        if not self.advertised_host:
            self.advertised_host = _primary_ipv4() if bound_host in ("0.0.0.0", "::", "") \
                else bound_host
        listener = self.config.broker_listeners[0]
        self.advertised_port = listener.advertised_port or self.port
        self.lifecycle = BrokerLifecycle(
            self.node_id, self.cluster_id, self.channel,
            [ListenerEndpoint(self.listener_name, self.advertised_host, self.advertised_port)],
            self.config.rack, lambda: self.metadata.offset,
            self.config.get("broker.heartbeat.interval.ms"), self.incarnation_id)
        self.lifecycle.start()
        await self._catch_up()
        while not await self.lifecycle.wait_unfenced(30.0):
            log.info("Broker %d is waiting for the controller to unfence it", self.node_id)
        self._set_aside_strays()
        handlers = load_all()
        self.dispatcher = Dispatcher(self._services(ApiSet(handlers, topic_ids=True)), handlers)
        self.groups.start()
        self.transactions.start()
        self.fetchers.start()
        await self.listener.serve(self.dispatcher.respond)
        self._start_background_work()
        log.info("spark_log broker %d (cluster %s) listening on %s:%d, advertised as %s:%d",
                 self.node_id, self.cluster_id, bound_host, self.port, self.advertised_host,
                 self.advertised_port)

    async def _catch_up(self) -> None:
        """As Kafka's broker does, publish the metadata only from the image holding this
        broker's registration on, where the controller has already moved the leaderships of a
        previous incarnation away: a restart then never takes, one by one, the leaderships an
        older image still names (after SIGKILL, every one it held). Then it may be unfenced."""
        while not await self.lifecycle.wait_registered(30.0):
            log.info("Broker %d is waiting for the controller to register it", self.node_id)
        while True:
            try:
                await self.metadata.wait_for_offset(self.lifecycle.epoch, timeout=30.0)
                break
            except TimeoutError:
                log.info("Broker %d is waiting for the metadata log to reach its registration "
                         "(offset %d; applied %d)", self.node_id, self.lifecycle.epoch,
                         self.metadata.offset)
        self.metadata.add_publisher(self.publisher.publish)
        self.lifecycle.ready_to_unfence = True

    def _services(self, api_set: ApiSet) -> Services:
        return Services(
            node_id=self.node_id, cluster_id=self.cluster_id,
            advertised_host=self.advertised_host, advertised_port=self.advertised_port,
            listener_name=self.listener_name, data_dir=self.data_dir, config=self.config,
            clock=self.clock, metrics=self.metrics, api_set=api_set, logs=self.logs,
            cluster=self.cache, topics=self.topics, replicas=self.replicas, groups=self.groups,
            transactions=self.transactions, producer_ids=self.producer_ids)

    async def stop(self) -> None:
        """A controlled shutdown, then the files."""
        log.info("Shutting down broker %d", self.node_id)
        lifecycle = getattr(self, "lifecycle", None)
        # Waiting longer than a session gains nothing: had this broker just stopped, the
        # controller would have fenced it by then (and with no controller, nothing moves).
        wait_s = self.config.get("broker.session.timeout.ms") / 1000
        if lifecycle is not None and not lifecycle.fenced and \
                not await lifecycle.controlled_shutdown(wait_s):
            log.warning("Broker %d: the controller did not grant the controlled shutdown "
                        "within broker.session.timeout.ms (%ss); stopping anyway",
                        self.node_id, wait_s)
        if lifecycle is not None:
            await lifecycle.stop()
        self.listener.close()
        await self.fetchers.stop()
        await self.isr_changes.stop()
        self.replicas.wake_all()
        await self.groups.stop()
        await self.transactions.stop()
        await self.brokers.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.listener.close_connections(SHUTDOWN_GRACE_S)
        await self.cleaner.stop()
        self.logs.close()
        log.info("Broker %d shut down cleanly", self.node_id)

    def _coordinator_elected(self, topic: str, partition: int, leader_epoch: int) -> None:
        if topic == OFFSETS_TOPIC:
            self.groups.on_elected(partition, leader_epoch)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.transactions.on_elected(partition, leader_epoch)

    def _coordinator_resigned(self, topic: str, partition: int) -> None:
        if topic == OFFSETS_TOPIC:
            self.groups.on_resigned(partition)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.transactions.on_resigned(partition)

    def _topic_id(self, topic: str) -> UUID | None:
        found = self.cache.image.topic(topic)
        return None if found is None else found.id

    def _internal_replication(self, topic: str) -> int:
        key = "offsets.topic.replication.factor" if topic == OFFSETS_TOPIC \
            else "transaction.state.log.replication.factor"
        # A node that is its own quorum is the only broker there can be (Kafka's single-node
        # example configuration sets these to 1).
        return self.config.get(key) if self.config.voters else 1

    def _set_aside_strays(self) -> None:
        for topic, partition in self.publisher.stray_partitions():
            log.warning("%s-%d has a log here but is not hosted here by the cluster metadata; "
                        "it is kept, not served", topic, partition)

    def add_state_metrics(self) -> None:
        """Add the state gauges (read at scrape time on this loop) to `metrics`, and count
        records out from now on: someone is going to read them."""
        from spark_log.broker.metrics.metrics_state import BrokerState, broker_state_metrics

        state = BrokerState(self.logs, self.groups, self.transactions,
                            lambda: self.listener.connection_count,
                            self.replicas.led_partitions)
        self.metrics.add_state(lambda: broker_state_metrics(state))
        self.metrics.count_records_out = True

    # ---- periodic work --------------------------------------------------------------------
    def _start_background_work(self) -> None:
        self.cleaner.start()  # compaction, if log.cleaner.enable
        self._every(self.config.get("log.retention.check.interval.ms"), self._retention)
        self._every(self.config.get("replica.lag.time.max.ms") // 2, self.replicas.shrink_isrs)
        self._every(FLUSH_CHECK_INTERVAL_MS, self.logs.flush_due)
        self._every(self.config.get("log.flush.offset.checkpoint.interval.ms"),
                    self.logs.checkpoint)
        self._every(self.config.get("offsets.retention.check.interval.ms"),
                    self.groups.expire_offsets)
        self._every(self.config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                    self.transactions.abort_timed_out_transactions)
        self._every(self.config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
                    self.transactions.expire_transactional_ids)
        self._every(self.config.get("producer.id.expiration.check.interval.ms"),
                    self._expire_producers)

    def _every(self, interval_ms: int, work: Callable[[], Awaitable[None] | None]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                if self.logs.failure.failed:
                    continue  # an offline data directory: nothing to flush, retain or expire
                try:
                    result = work()
                    if result is not None:
                        await result
                except Exception:
                    log.exception("periodic task %s failed", getattr(work, "__name__", work))

        self._tasks.append(asyncio.create_task(loop()))

    def _retention(self) -> None:
        deleted = self.logs.run_retention()
        if deleted:
            log.info("Retention deleted %d segment(s)", deleted)

    def _expire_producers(self) -> None:
        max_idle = self.config.get("producer.id.expiration.ms")
        for partition_log in self.logs.logs():
            partition_log.remove_expired_producers(max_idle)


def _primary_ipv4() -> str:
    """This host's IPv4 address by its name (what clients elsewhere would use), or loopback."""
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"
