"""A node of the cluster (Kafka's KafkaRaftServer): its directories and identity, its replica of
the metadata quorum, the metadata loader every role reads from, and its roles — the active
controller's machinery when it is a controller, the broker when it is a broker — started and
stopped in an order that keeps each part's promises.

Start: lock and identify the directories (a new single-node directory is formatted here), load
the metadata log and subscribe the loader, the controller and the broker's logs to it, bind the
controller listener (a quorum member), start the quorum replica, then the broker (it registers
and waits to be unfenced), and write `broker.json` — the sign for tools that the node serves.
Stop: `broker.json` removed, the broker's controlled shutdown and files, the controller, the
quorum replica (a leader resigns first, so the others elect at once), the listener, the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import time
import uuid
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from spark_log.broker.broker import Broker
from spark_log.broker.cluster.controller_channel import ControllerChannel
from spark_log.broker.cluster.metadata_import import import_records
from spark_log.broker.metrics.broker_metrics import StateCollector
from spark_log.broker.metrics.metrics_server import serve_metrics
from spark_log.broker.metrics.quorum_metrics import ElectionTimer, QuorumState, quorum_metrics
from spark_log.broker.server.controller_dispatcher import ControllerDispatcher
from spark_log.broker.server.listener import Listener
from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.controller.batch_decoder import BatchDecoder
from spark_log.controller.controller_config import settings_from, timings_from
from spark_log.controller.feature_control import bootstrap_records
from spark_log.controller.metadata_loader import MetadataLoader, decode_batch
from spark_log.controller.quorum_controller import QuorumController
from spark_log.controller.raft_driver import RaftDriver
from spark_log.controller.record_memo import RecordMemo
from spark_log.controller.snapshot_generator import SnapshotGenerator
from spark_log.metadata.metadata_topic import METADATA_LOG_DIR
from spark_log.node_config.broker_config import BrokerConfig
from spark_log.properties import ConfigError
from spark_log.storage.data_dir import meta_properties
from spark_log.storage.data_dir.atomic_file import write_atomically
from spark_log.storage.data_dir.lock_file import DataDirLock
from spark_log.storage.data_dir.prepare import prepare_data_dir

log = logging.getLogger(__name__)

INFO_FILE = "broker.json"
RESIGN_S = 2.0  # how long a leaving quorum leader waits for its EndQuorumEpoch to be heard
SLOW_SHUTDOWN_S = 15.0  # after this, and as often again, a shutdown logs what it waits on


class Node:
    """One process of the cluster. Invariants: `broker.json` exists exactly while the broker
    serves clients; the quorum replica starts only after every listener of its commits is
    subscribed, so each sees the whole log; the controller listener is bound before the replica
    starts (other voters can reach it as soon as it votes). Event-loop thread only."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config, self.clock = config, clock
        self.node_id = config.node_id
        self._locks = [DataDirLock(d) for d in config.storage_dirs]
        self.cluster_id = ""
        self.driver: RaftDriver | None = None
        self.loader: MetadataLoader | None = None
        self.snapshots: SnapshotGenerator | None = None
        self.controller: QuorumController | None = None
        self.controller_apis: ControllerDispatcher | None = None
        self.controller_listener: Listener | None = None
        self.broker: Broker | None = None
        self.channel: ControllerChannel | None = None
        self.registry = CollectorRegistry()  # the broker's, once it has one
        self._elections: ElectionTimer | None = None
        self._metrics_server: asyncio.Server | None = None
        self._leader = -1
        self._memo = RecordMemo()  # closed once the node has started
        self.incarnation_id = uuid.uuid4()  # this process's broker registration

    # ---- what tests and tools read --------------------------------------------------------
    @property
    def port(self) -> int:
        """The broker's client port (bound)."""
        assert self.broker is not None, "not a broker"
        return self.broker.port

    # ---- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        new_dir = self._identify()
        self._open_quorum()
        if self.config.is_broker:
            self._open_broker(new_dir)
        self._open_metrics()
        await self._bind_controller_listener()
        assert self.driver is not None
        await self.driver.start()
        if self.broker is not None:
            await self.broker.start()
            self._write_info()
        self._memo.close()
        log.info("Node %d (roles %s, cluster %s) started", self.node_id,
                 ",".join(sorted(self.config.roles)), self.cluster_id)

    def _identify(self) -> bool:
        """Lock every directory and read (or, for a new single node, write) its identity;
        whether the data directory is new: formatted just now, or by `spark-log storage format`
        with no node started on it since (no metadata log yet)."""
        metadata_dir = self.config.metadata_log_dir
        created = metadata_dir is not None and not (metadata_dir / METADATA_LOG_DIR).exists()
        for directory, lock in zip(self.config.storage_dirs, self._locks, strict=True):
            prepare_data_dir(directory)
            lock.acquire()
            identity = meta_properties.load_or_create(directory, self.node_id,
                                                      self.config.get("cluster.id"))
            if self.cluster_id and identity.cluster_id != self.cluster_id:
                raise ConfigError(
                    f"{directory} belongs to cluster {identity.cluster_id}, another directory "
                    f"of node {self.node_id} to cluster {self.cluster_id}")
            self.cluster_id = identity.cluster_id
            created |= identity.created and directory == self.config.data_dir
        return created

    def _open_quorum(self) -> None:
        config = self.config
        metadata_dir = config.metadata_log_dir
        assert metadata_dir is not None, "log.dirs must be set"
        listener = config.controller_listener_names[0] if config.controller_listener_names \
            else "CONTROLLER"
        # What an old data directory holds is read first: a damaged file refuses the start
        # before anything is written.
        bootstrap = [*bootstrap_records(), *self._imported()] if config.is_controller else []
        self.driver = driver = RaftDriver(
            self.node_id, config.quorum_config(), metadata_dir, cluster_id=self.cluster_id,
            addresses=config.voters, listener_name=listener)
        driver.on_leader_change(self._leader_changed)
        # A combined node's controller and broker replay the same batches: decoded once; and
        # while the node starts, each distinct record value of its log once (`RecordMemo`).
        decode = BatchDecoder(readers=2 if config.is_controller else 1,
                              decode=functools.partial(decode_batch, decode=self._memo))
        self.loader = loader = MetadataLoader(driver, node_id=self.node_id, decode=decode)
        self.snapshots = SnapshotGenerator(
            driver, node_id=self.node_id,
            max_record_bytes=config.get("metadata.log.max.record.bytes.between.snapshots"),
            max_interval_ms=config.get("metadata.log.max.snapshot.interval.ms"))
        loader.add_publisher(self.snapshots.publish)
        if config.is_controller:
            settings = settings_from(config, self.cluster_id)
            if config.is_broker:  # combined: the controller knows its own process's broker
                settings = dataclasses.replace(settings,
                                               local_broker_incarnation=self.incarnation_id)
            self.controller = QuorumController(
                driver, settings, timings=timings_from(config), bootstrap=bootstrap,
                decode=decode)
            self.controller_apis = ControllerDispatcher(driver, self.controller)

    def _imported(self) -> list[object]:
        """The topics and producer ids a data directory kept before the node had a metadata
        log (its `topics.json` and `producer-id-block`), as records for the bootstrap batch;
        only the node that is its own quorum has such a directory."""
        data_dir, metadata_dir = self.config.data_dir, self.config.metadata_log_dir
        if self.config.voters or data_dir is None or metadata_dir is None or \
                any(f.stat().st_size for f in (metadata_dir / METADATA_LOG_DIR).glob("*.log")):
            return []  # the bootstrap batch is written only into an empty metadata log
        return import_records(data_dir, self.node_id)

    def _open_broker(self, new_dir: bool) -> None:
        assert self.loader is not None
        self.channel = ControllerChannel(
            self.node_id, self.controller_apis, lambda: self._leader,
            {voter: address for voter, address in self.config.voters.items()},
            self.config.get("controller.socket.timeout.ms"))
        self.broker = Broker(self.config, self.clock, self.cluster_id, self.channel, new_dir,
                             self.incarnation_id)
        self.broker.open(self.loader)

    def _open_metrics(self) -> None:
        """The quorum's gauges and election timer in the broker's registry (one endpoint
        serves both), or in one of the node's own on a controller-only node."""
        if self.broker is not None:
            self.registry = self.broker.metrics.registry
        self._elections = ElectionTimer(self.registry, time.monotonic)
        driver, loader, controller = self.driver, self.loader, self.controller
        assert driver is not None and loader is not None
        state = QuorumState(
            replica=lambda: None if driver.stopped else driver.replica,
            log_end_offset=lambda: driver.replica.log.end_offset,
            loaded=loader,
            controller_active=lambda: controller is not None and controller.active,
            is_controller=controller is not None)
        self.registry.register(StateCollector(lambda: quorum_metrics(state)))

    async def _bind_controller_listener(self) -> None:
        if not (self.config.is_controller and self.config.voters):
            return  # a quorum of its own answers nobody
        assert self.controller_apis is not None
        listener = self.config.controller_listeners[0]
        self.controller_listener = Listener(listener.host, listener.port,
                                            self.config.get("socket.request.max.bytes"))
        await self.controller_listener.bind()
        await self.controller_listener.serve(self.controller_apis.respond)

    def _leader_changed(self, epoch: int, leader: int) -> None:
        self._leader = leader
        if self._elections is not None:
            self._elections.leader_changed(leader)
        log.info("Node %d: the metadata quorum's leader is %s in epoch %d", self.node_id,
                 leader if leader >= 0 else "unknown", epoch)
        if self.channel is not None:
            self.channel.leader_changed()

    async def stop(self) -> None:
        """The clean shutdown of every role, the broker first."""
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self.broker is not None:
            (self.broker.data_dir / INFO_FILE).unlink(missing_ok=True)
            await self.broker.stop()
        if self.channel is not None:
            await self.channel.close()
        if self.controller is not None:
            await self.controller.close()
        if self.driver is not None and not self.driver.stopped:
            if self.driver.is_leader and len(self.config.quorum_config().voters) > 1:
                with contextlib.suppress(Exception):
                    await self.driver.resign(RESIGN_S)
            await self.driver.close()
        if self.snapshots is not None:
            self.snapshots.close()
        if self.controller_listener is not None:
            self.controller_listener.close()
            await self.controller_listener.close_connections(1.0)
        for lock in self._locks:
            lock.release()
        log.info("Node %d stopped", self.node_id)

    def _write_info(self) -> None:
        assert self.broker is not None
        info = {"pid": os.getpid(), "host": self.broker.advertised_host,
                "port": self.broker.advertised_port, "node_id": self.node_id,
                "cluster_id": self.cluster_id}
        write_atomically(self.broker.data_dir / INFO_FILE, json.dumps(info).encode())

    async def serve_metrics(self, port: int) -> None:
        """Prometheus text on http://host:port/metrics: the broker's metrics if it is one, and
        the quorum's, the controller's and the loaded metadata's (host: the broker's, or the
        controller listener's on a controller-only node)."""
        if self.broker is not None:
            self.broker.add_state_metrics()
            host = self.broker.host
        else:
            host = self.config.controller_listeners[0].host if self.config.voters \
                else "127.0.0.1"
        self._metrics_server = await serve_metrics(self.registry, host, port)


async def run_until_signalled(config: BrokerConfig, metrics_port: int | None = None,
                              started: Callable[[], None] | None = None) -> int:
    """Run a node until SIGTERM or SIGINT, then shut it down cleanly; `started` is called once
    it serves. Returns an exit code."""
    import signal

    node = Node(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    if started is not None:
        started()
    if metrics_port is not None:
        await node.serve_metrics(metrics_port)
    await stop.wait()
    watch = asyncio.create_task(_report_slow_shutdown(SLOW_SHUTDOWN_S))
    try:
        await node.stop()
    finally:
        watch.cancel()
    return 0


async def _report_slow_shutdown(every_s: float) -> None:
    """Log every other task's stack each `every_s` while the shutdown runs: a shutdown that
    hangs then says where (Kafka's answer is a thread dump)."""
    while True:
        await asyncio.sleep(every_s)
        stacks = io.StringIO()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.print_stack(file=stacks)
        log.warning("The shutdown still runs; its tasks are waiting here:\n%s", stacks.getvalue())
