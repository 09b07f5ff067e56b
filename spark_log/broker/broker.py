"""One broker: storage, topics, request handling and the listening socket, assembled, started
and stopped as a unit. The only module that builds the concrete coordinators and managers: each
part receives the narrow collaborators it uses (protocols of the package that uses them), and
request handlers reach them through `Services`.

`start()` opens the data directory (refusing one that is unusable or belongs to another node or
cluster, recovering logs after a crash), binds the listener and then writes `broker.json` (pid,
advertised host and port) into the data directory — the signal that clients can connect, used by
tests and by the sidecar launcher. `stop()` is the clean shutdown of SIGTERM/SIGINT: stop
accepting, finish in-flight requests, flush and checkpoint every log, write the clean-shutdown
marker, remove `broker.json`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.group.group_coordinator import GroupCoordinator
from spark_log.broker.launch_options import parse_listener
from spark_log.broker.metrics.broker_metrics import BrokerMetrics
from spark_log.broker.replication.replica_manager import ReplicaManager
from spark_log.broker.server.dispatcher import Dispatcher
from spark_log.broker.server.handlers import load_all
from spark_log.broker.server.handlers.registry import Handler
from spark_log.broker.server.listener import Listener
from spark_log.broker.server.services import Services
from spark_log.broker.topics.topic_manager import TopicManager
from spark_log.broker.topics.topic_metadata import TopicMetadata
from spark_log.broker.transaction.producer_id_manager import ProducerIdManager
from spark_log.broker.transaction.transaction_coordinator import TransactionCoordinator
from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.protocol import ApiSet
from spark_log.storage.cleaner.cleaner_config import CleanerConfig
from spark_log.storage.cleaner.cleaner_transactions import TRANSACTIONAL_BATCH_POLICY
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.data_dir import meta_properties
from spark_log.storage.data_dir.atomic_file import write_atomically
from spark_log.storage.data_dir.lock_file import DataDirLock
from spark_log.storage.data_dir.prepare import prepare_data_dir
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_dir import parse_partition_dir
from spark_log.storage.log.record_checks import (
    RECORD_TIMESTAMP_SEARCH,
    validate_records,
)

log = logging.getLogger(__name__)

INFO_FILE = "broker.json"
FLUSH_CHECK_INTERVAL_MS = 1000
SHUTDOWN_GRACE_S = 5  # how long requests in hand may take to finish at shutdown


class Broker:
    """A running broker. Everything but the metrics scrape runs on one asyncio event loop, so
    no component needs locks. Invariant: `broker.json` exists exactly while the listener is
    open and the logs are loaded."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        data_dir = config.data_dir
        assert data_dir is not None, "log.dirs must be set"
        self.data_dir = data_dir
        self._lock = DataDirLock(data_dir)
        self.metrics = BrokerMetrics()
        self.cluster_id = ""
        self.host, self.port = parse_listener(config.get("listeners"))
        self.advertised_host, self.advertised_port = self.host, self.port
        self.listener = Listener(self.host, self.port, config.get("socket.request.max.bytes"))
        self._tasks: list[asyncio.Task[None]] = []
        self.logs: LogManager
        self.topics: TopicManager
        self.replicas: ReplicaManager
        self.dispatcher: Dispatcher
        self.groups: GroupCoordinator
        self.transactions: TransactionCoordinator

    # ---- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        prepare_data_dir(self.data_dir)
        self._lock.acquire()
        identity = meta_properties.load_or_create(
            self.data_dir, self.node_id, self.config.get("cluster.id"))
        self.cluster_id = identity.cluster_id
        # Small files that may refuse the start go before anything is written or recovered.
        self.producer_ids = ProducerIdManager(self.data_dir)
        metadata = TopicMetadata(self.data_dir)
        metadata.load(partition_dirs(self.data_dir))
        self.topics = TopicManager(self.config, metadata)
        # Topic configs go in at construction, so segment settings hold from the first open.
        self.logs = LogManager(str(self.data_dir), clock=self.clock,
                               default_config=self.topics.defaults,
                               topic_configs=self.topics.all_log_configs(),
                               record_search=RECORD_TIMESTAMP_SEARCH,
                               record_validator=validate_records,
                               new_dir=identity.created, checked_at_start=INTERNAL_TOPICS)
        self.topics.attach(self.logs)
        self.replicas = ReplicaManager(self.logs, self.node_id)
        self.cleaner = LogCleaner(self.logs, CleanerConfig.from_broker(self.config.get),
                                  clock=self.clock,
                                  last_stable_offset=self.replicas.last_stable_offset,
                                  batch_policy=TRANSACTIONAL_BATCH_POLICY)
        self.replicas.become_leader()
        self.groups = GroupCoordinator(self.config, self.clock, self.topics, self.replicas)
        self.transactions = TransactionCoordinator(self.config, self.clock, self.topics,
                                                   self.replicas, self.groups, self.producer_ids)
        bound_host, self.port = await self.listener.bind()
        self.advertised_host, self.advertised_port = self._advertised(bound_host)
        handlers = load_all()
        self.dispatcher = Dispatcher(self._services(handlers), handlers)
        await self.listener.serve(self.dispatcher.respond)
        self._start_background_work()
        self._write_info()
        log.info("spark_log broker %d (cluster %s) listening on %s:%d, advertised as %s:%d",
                 self.node_id, self.cluster_id, bound_host, self.port, self.advertised_host,
                 self.advertised_port)

    def _services(self, handlers: Mapping[int, Handler]) -> Services:
        """What request handlers reach of this broker (once the listener is bound)."""
        return Services(
            node_id=self.node_id, cluster_id=self.cluster_id,
            advertised_host=self.advertised_host, advertised_port=self.advertised_port,
            data_dir=self.data_dir, config=self.config, clock=self.clock, metrics=self.metrics,
            api_set=ApiSet(handlers, topic_ids=True), logs=self.logs, topics=self.topics,
            replicas=self.replicas, groups=self.groups, transactions=self.transactions,
            producer_ids=self.producer_ids)

    async def stop(self) -> None:
        log.info("Shutting down broker %d", self.node_id)
        (self.data_dir / INFO_FILE).unlink(missing_ok=True)
        self.listener.close()
        self.replicas.wake_all()
        await self.groups.stop()
        await self.transactions.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.listener.close_connections(SHUTDOWN_GRACE_S)
        await self.cleaner.stop()
        self.logs.close()
        self._lock.release()
        log.info("Broker %d shut down cleanly", self.node_id)

    def _advertised(self, bound_host: str) -> tuple[str, int]:
        listener = self.config.get("advertised.listeners")
        if listener:
            host, port = parse_listener(listener)
            return host, port or self.port
        if bound_host in ("0.0.0.0", "::", ""):
            return _primary_ipv4(), self.port
        return bound_host, self.port

    def _write_info(self) -> None:
        info = {"pid": os.getpid(), "host": self.advertised_host, "port": self.advertised_port,
                "node_id": self.node_id, "cluster_id": self.cluster_id}
        write_atomically(self.data_dir / INFO_FILE, json.dumps(info).encode())

    async def serve_metrics(self, port: int) -> None:
        """Prometheus text format on http://host:port/metrics, state gauges included (read at
        scrape time on this loop)."""
        from spark_log.broker.metrics.metrics_server import serve_metrics
        from spark_log.broker.metrics.metrics_state import BrokerState, broker_state_metrics

        state = BrokerState(self.logs, self.groups, self.transactions,
                            lambda: self.listener.connection_count)
        self.metrics.add_state(lambda: broker_state_metrics(state))
        self._metrics_server = await serve_metrics(self.metrics, self.host, port)

    @property
    def connection_count(self) -> int:
        """Client connections open now."""
        return self.listener.connection_count

    # ---- periodic work --------------------------------------------------------------------
    def _start_background_work(self) -> None:
        self.cleaner.start()  # compaction, if log.cleaner.enable
        self._every(self.config.get("log.retention.check.interval.ms"), self._retention)
        self._every(FLUSH_CHECK_INTERVAL_MS, self._flush)
        self._every(self.config.get("log.flush.offset.checkpoint.interval.ms"), self._checkpoint)
        self.groups.start()
        self._every(self.config.get("offsets.retention.check.interval.ms"),
                    self.groups.expire_offsets)
        self.transactions.start()
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

    def _flush(self) -> None:
        self.logs.flush_due()

    def _checkpoint(self) -> None:
        self.logs.checkpoint()

    def _expire_producers(self) -> None:
        max_idle = self.config.get("producer.id.expiration.ms")
        for partition_log in self.logs.logs():
            partition_log.remove_expired_producers(max_idle)


def partition_dirs(data_dir: Path) -> list[tuple[str, int]]:
    """(topic, partition) of every partition directory in the data directory."""
    found = (parse_partition_dir(p.name) for p in data_dir.iterdir() if p.is_dir())
    return [tp for tp in found if tp is not None]


def _primary_ipv4() -> str:
    """This host's IPv4 address by its name (what clients elsewhere would use), or loopback."""
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


async def run_until_signalled(config: BrokerConfig, metrics_port: int | None = None) -> int:
    """Run a broker until SIGTERM or SIGINT, then shut it down cleanly. Returns an exit code."""
    import signal

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    if metrics_port is not None:
        await broker.serve_metrics(metrics_port)
    await stop.wait()
    await broker.stop()
    return 0

