"""The asyncio side of one quorum replica (Kafka's KafkaRaftClientDriver): it loads the
metadata log, runs the `RaftReplica` state machine on a timer, carries out each step's actions
on the files (`MetadataLog`) and the network (`QuorumChannel`), answers the requests of other
replicas, and offers the layers above it proposals, commits, snapshots and leader changes.

Every step — a tick, a request or response fed in, a proposal, a snapshot taken — runs to the
end without yielding to the event loop: its actions are carried out in order, each durable one
(fsync) before the next, so a vote goes out only after it is on disk. Metadata-log I/O is
synchronous, as the broker's storage is. An error while carrying out an action (an I/O error
on the metadata log, a broken Raft promise) stops the replica: one ERROR line, the files let go
without another write, every later call refused; a replica must not go on with a log it cannot
trust.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.deadline import within
from spark_log.raft import actions as act
from spark_log.raft.config import QuorumConfig, Random
from spark_log.raft.messages import (
    Batch,
    Error,
    FetchRequest,
    FetchResponse,
    Message,
    OffsetAndEpoch,
    Response,
    VoteResponse,
)
from spark_log.raft.replica import NEVER, RaftReplica
from spark_log.raft.replicated_log import Validity
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem

from . import raft_codec
from .batch_codec import encode_batches
from .metadata_log import DEFAULT_SEGMENT_BYTES, MetadataLog
from .quorum_channel import Address, QuorumChannel
from .quorum_description import FetchTimes, QuorumDescription, describe_quorum_response
from .quorum_errors import DriverStoppedError
from .raft_delivery import CommitListener, Delivery, LeaderListener, SnapshotListener
from .snapshot_files import SnapshotCheck, check_record_batches

log = logging.getLogger(__name__)


@dataclass
class _Inbound:
    future: asyncio.Future[object]
    source: int


class RaftDriver:
    """One replica of the quorum (a voter when its id is among `config.voters`, else an
    observer) on real files and sockets. `addresses` are the voters' (host, port), as
    `controller.quorum.voters` gives them (node_config's `voters`).

        driver = RaftDriver(1, QuorumConfig(frozenset({1, 2, 3})), "/var/lib/meta",
                            cluster_id="...", addresses={2: ("h2", 9093), ...})
        driver.on_commit(apply_batches)
        await driver.start()
        offset = driver.propose([record_bytes])      # None unless leader
        await driver.wait_committed(offset)

    Invariants: the replica is stepped by one call at a time, each step's actions carried out
    in order before the next step; every inbound request gets at most one answer (None when
    none is due: the driver stopped, or raft dropped the request); once stopped, nothing is
    written. Not thread-safe: every method runs on the driver's event loop.
    """

    def __init__(self, node_id: int, config: QuorumConfig, log_dir: str | Path, *,
                 cluster_id: str, addresses: Mapping[int, tuple[str, int]] | None = None,
                 clock: Clock = SYSTEM_CLOCK, rng: Random | None = None,
                 fs: FileSystem = DEFAULT_FS, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 snapshot_check: SnapshotCheck = check_record_batches,
                 listener_name: str = "CONTROLLER") -> None:
        self.node_id, self.config, self.cluster_id = node_id, config, cluster_id
        self.clock = clock
        self.addresses = {v: Address(*a) for v, a in (addresses or {}).items()}
        self.listener_name = listener_name
        self._rng = rng or random.Random()
        self.metadata_log = MetadataLog(log_dir, node_id, config.voters, clock=clock, fs=fs,
                                        segment_bytes=segment_bytes,
                                        snapshot_check=snapshot_check)
        self._replica: RaftReplica | None = None
        self._delivery = Delivery(0)
        self._channel: QuorumChannel | None = None
        self._timer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._inbound: dict[int, _Inbound] = {}
        self._next_inbound = 0
        self._fetch_times = FetchTimes()
        self._last_tick = -1
        self._stopped: BaseException | None = None
        self._closed = False

    # ---- the layers above ---------------------------------------------------------------------
    def on_commit(self, listener: CommitListener) -> None:
        """Called with committed batches, in order, each once; those registered before `start`
        get the whole log after the loaded snapshot. Control batches (a leader's epoch start:
        its LeaderChangeMessage, or raft's mark on the replica that led that epoch) carry
        nothing for the application but their offsets."""
        self._delivery.listeners.commit.append(listener)

    def on_snapshot(self, listener: SnapshotListener) -> None:
        """Called with a snapshot to load: the one on disk at `start`, or one fetched from the
        leader; the batches that follow it come to the commit listeners."""
        self._delivery.listeners.snapshot.append(listener)

    def on_leader_change(self, listener: LeaderListener) -> None:
        """Called with (epoch, leader id) when either changes (-1: no leader known)."""
        self._delivery.listeners.leader.append(listener)

    @property
    def replica(self) -> RaftReplica:
        if self._replica is None:
            raise DriverStoppedError(f"quorum replica {self.node_id} is not started")
        return self._replica

    @property
    def is_leader(self) -> bool:
        return self._replica is not None and not self.stopped and self._replica.is_leader

    @property
    def stopped(self) -> bool:
        return self._stopped is not None or self._closed

    # ---- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the metadata log (MetadataLogError if it cannot be trusted) and run."""
        loaded = self.metadata_log.open()
        self._replica = RaftReplica(self.node_id, self.config, loaded.election, loaded.log,
                                    loaded.snapshot_data, self._now(), self._rng)
        self._delivery.applied = loaded.log.start_offset
        if loaded.snapshot_data is not None and loaded.log.snapshot_id is not None:
            self._delivery.snapshot_loaded(loaded.log.snapshot_id, loaded.snapshot_data)
        # A follower again: its listeners learn at once whom it follows, as Kafka's raft client
        # tells a listener the current leader when it registers.
        if self._replica.leader_id >= 0:
            self._delivery.leader_changed(self._replica.epoch, self._replica.leader_id)
        others = {p: a for p, a in self.addresses.items() if p != self.node_id}
        if others:
            self._channel = QuorumChannel(
                self.node_id, others, self.cluster_id, self._on_response,
                request_timeout_ms=self.config.request_timeout_ms,
                backoff_ms=max(self.config.retry_backoff_ms, 1))
        try:
            self._delivery.deliver(self._replica)  # the snapshot on disk, if any
        except Exception as e:
            raise self._fail(e) from e
        self._timer = asyncio.get_running_loop().create_task(
            self._run_timer(), name=f"raft-{self.node_id}-timer")

    async def resign(self, timeout_s: float = 5.0) -> None:
        """Graceful shutdown of a leader: tell the voters (EndQuorumEpoch) so one of them
        stands at once, and wait up to `timeout_s` for them to be told."""
        if self.stopped or self._replica is None or not self._replica.is_leader:
            return
        self._step(lambda: self.replica.resign(self._now()))
        if self._channel is not None:
            await self._channel.drain(timeout_s)

    async def close(self) -> None:
        """Stop and close the files (flushed)."""
        await self._shut(flush=True)

    async def abort(self) -> None:
        """Stop at once, as a crash would: nothing is written or flushed beyond what the
        actions already made durable."""
        await self._shut(flush=False)

    async def _shut(self, flush: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self._halt(None)
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        if self._channel is not None:
            await self._channel.close()
        if flush and self._stopped is None:
            self.metadata_log.close()
        else:
            self.metadata_log.abandon()

    def _halt(self, cause: BaseException | None) -> None:
        """Refuse further work: inbound requests get no answer, waits end."""
        for inbound in self._inbound.values():
            if not inbound.future.done():
                inbound.future.set_result(None)
        self._delivery.stop(cause)
        self._wake.set()

    def _fail(self, error: BaseException) -> DriverStoppedError:
        if self._stopped is None:
            self._stopped = error
            log.error("Quorum replica %d stopped: %s: %s", self.node_id,
                      type(error).__name__, error)
            log.debug("Quorum replica %d stopped", self.node_id, exc_info=error)
            self._halt(error)
            self.metadata_log.abandon()
            if self._channel is not None:
                asyncio.get_running_loop().create_task(self._channel.close())
        return DriverStoppedError(f"quorum replica {self.node_id} stopped: {error}")

    def _check_running(self) -> RaftReplica:
        if self._stopped is not None:
            raise DriverStoppedError(f"quorum replica {self.node_id} stopped: {self._stopped}")
        if self._closed or self._replica is None:
            raise DriverStoppedError(f"quorum replica {self.node_id} is not running")
        return self._replica

    # ---- work from the layers above -----------------------------------------------------------
    def propose(self, records: Iterable[bytes]) -> int | None:
        """Append `records` (at least one) as one batch if this replica leads; the offset of
        the first, or None when it does not lead."""
        replica = self._check_running()
        proposed: list[int | None] = []

        def call() -> list[act.Action]:
            offset, actions = replica.propose(records, self._now())
            if offset is not None:  # known before its commit can be delivered
                self._delivery.proposed(offset, replica.epoch)
            proposed.append(offset)
            return actions

        self._step(call)
        return proposed[0]

    async def wait_committed(self, offset: int, timeout_s: float | None = None) -> None:
        """Until the records proposed at `offset` are committed (ProposalLostError when the
        leader lost its epoch first and the committed log replaced them: other records at their
        offset, or a later epoch's at or below it; TimeoutError; DriverStoppedError)."""
        self._check_running()
        await within(timeout_s, self._delivery.wait(offset))

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The application's state after every batch below `snapshot_id.offset` (committed, a
        batch boundary, `snapshot_id.epoch` the epoch of the last): store it and drop the log
        below it. ValueError for an offset raft cannot snapshot at."""
        replica = self._check_running()
        self._step(lambda: replica.take_snapshot(snapshot_id, data), caller_errors=ValueError)

    def describe(self) -> QuorumDescription | None:
        """The quorum as this replica sees it when it leads (DescribeQuorum), else None."""
        replica = self._replica
        if replica is None or not self.is_leader:
            return None
        self._fetch_times.start_epoch(replica.epoch)
        return self._fetch_times.describe(self.node_id, replica.high_watermark,
                                          replica.log.end_offset, self.config.voters,
                                          self.clock.now_ms())

    # ---- requests from other replicas ---------------------------------------------------------
    async def handle_request(self, request: RequestPayload) -> ResponsePayload | None:
        """The answer to a quorum request (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
        FetchSnapshot, DescribeQuorum); None when none is due (the driver is not running, or
        raft dropped the request). A fetch that finds nothing new may be held for up to its
        max wait (a long poll)."""
        api_key, version = request.__api_key__, request.__version__
        if api_key == raft_codec.DESCRIBE_QUORUM:
            replica = self._replica
            return describe_quorum_response(
                request, self.describe(), epoch=replica.epoch if replica else -1,
                leader_id=replica.leader_id if replica else -1,
                endpoints={v: (self.listener_name, a.host, a.port)
                           for v, a in self.addresses.items()})
        decoded = raft_codec.decode_request(request, self.cluster_id)
        if isinstance(decoded, raft_codec.Refused):
            return raft_codec.error_response(api_key, version, decoded.error)
        if self.stopped or self._replica is None:
            return None
        body = await self._ask(decoded)
        if body is None:
            return None
        return raft_codec.encode_response(cast(Response, body), version, self._encode_batches)

    async def _ask(self, inbound: raft_codec.Inbound) -> object:
        replica = self.replica
        self._next_inbound += 1
        key = self._next_inbound
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._inbound[key] = _Inbound(future, inbound.source)
        if isinstance(inbound.body, FetchRequest):
            self._observe_fetch(inbound.source, inbound.body)
        try:
            message = Message(inbound.source, self.node_id, key, inbound.body)
            self._step(lambda: replica.receive(message, self._now()))
            if not future.done():
                self._held(key)
            return await future
        except DriverStoppedError:
            return None
        finally:
            self._inbound.pop(key, None)

    def _held(self, key: int) -> None:
        """A fetch raft holds (a long poll): raft keeps one per replica, so an older one held
        for the same replica is forgotten: it gets no answer."""
        source = self._inbound[key].source
        for other, inbound in self._inbound.items():
            if other != key and inbound.source == source and not inbound.future.done():
                inbound.future.set_result(None)

    def _observe_fetch(self, source: int, body: FetchRequest) -> None:
        replica = self.replica
        if replica.is_leader and body.current_leader_epoch == replica.epoch and \
                replica.log.validate(body.fetch_offset, body.last_fetched_epoch)[0] \
                is Validity.VALID:
            self._fetch_times.start_epoch(replica.epoch)
            self._fetch_times.fetched(source, body.fetch_offset, replica.log.end_offset,
                                      self.clock.now_ms())

    def _on_response(self, message: Message) -> None:
        """A response from the channel, for raft."""
        if self.stopped or self._replica is None:
            return
        body = message.body
        if isinstance(body, VoteResponse) and body.vote_granted:
            self.metadata_log.leader_changes.granted(body.leader_epoch, message.source)
        with contextlib.suppress(DriverStoppedError):
            self._step(lambda: self.replica.receive(message, self._now()))

    def _encode_batches(self, batches: tuple[Batch, ...]) -> bytes:
        return encode_batches(batches, self.clock.now_ms(), self.metadata_log.leader_changes)

    # ---- stepping -----------------------------------------------------------------------------
    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _step(self, call: Callable[[], list[act.Action]],
              caller_errors: type[Exception] | tuple[type[Exception], ...] = ()) -> None:
        """One step: the replica's call, then each of its actions in order; then the news."""
        replica = self._check_running()
        try:
            actions = call()
        except caller_errors:
            raise
        except Exception as e:
            raise self._fail(e) from e
        try:
            for action in actions:
                self._carry_out(action)
            if any(isinstance(a, act.PersistElection) for a in actions):
                self._orphaned_fetches()
            self._wake.set()
            self._delivery.deliver(replica)
        except DriverStoppedError:
            raise
        except Exception as e:
            raise self._fail(e) from e

    def _carry_out(self, action: act.Action) -> None:
        mlog = self.metadata_log
        if isinstance(action, act.Send):
            self._send(action.message)
        elif isinstance(action, act.PersistElection):
            mlog.persist_election(action.state)
        elif isinstance(action, act.AppendBatches):
            mlog.append(action.batches)
        elif isinstance(action, act.TruncateLog):
            mlog.truncate(action.offset)
        elif isinstance(action, act.FlushLog):
            mlog.flush()
        elif isinstance(action, act.SaveSnapshot):
            mlog.save_snapshot(action.snapshot_id, action.data)
        elif isinstance(action, act.InstallSnapshot):
            mlog.install_snapshot(action.snapshot_id, action.data)
            self._delivery.snapshot_loaded(action.snapshot_id, action.data)
        elif isinstance(action, act.Commit):
            self._delivery.committed()
        elif isinstance(action, act.LeaderChange):
            log.info("Quorum replica %d is in epoch %d, %s", self.node_id, action.epoch,
                     "leading" if action.leader_id == self.node_id else
                     f"leader {action.leader_id}" if action.leader_id >= 0 else "no leader")
            self._delivery.leader_changed(action.epoch, action.leader_id)

    def _send(self, message: Message) -> None:
        if message.is_request:
            if self._channel is not None:
                self._channel.send(message)
            return
        inbound = self._inbound.get(message.correlation_id)
        if inbound is not None and not inbound.future.done():
            inbound.future.set_result(message.body)

    def _orphaned_fetches(self) -> None:
        """A new epoch state: raft forgot the fetches it held. Tell their senders who leads."""
        replica = self.replica
        for inbound in self._inbound.values():
            if not inbound.future.done():
                inbound.future.set_result(FetchResponse(Error.NOT_LEADER_OR_FOLLOWER,
                                                        replica.epoch, replica.leader_id))

    async def _run_timer(self) -> None:
        """Tick the replica whenever its next deadline comes (at most once a millisecond)."""
        while not self.stopped:
            replica = self.replica
            deadline, now = replica.next_deadline(), self._now()
            if deadline > now or now <= self._last_tick:
                self._wake.clear()
                wait = None if deadline >= NEVER else max(deadline - now, 1) / 1000
                with contextlib.suppress(TimeoutError):
                    await within(wait, self._wake.wait())
                continue
            self._last_tick = now
            with contextlib.suppress(DriverStoppedError):
                self._step(functools.partial(replica.tick, now))
