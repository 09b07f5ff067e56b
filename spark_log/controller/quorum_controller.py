"""The quorum controller (Kafka's QuorumController): on every controller node it follows the
metadata log the quorum commits; on the quorum's leader it is the active controller, which
turns the requests brokers forward (registrations, heartbeats, topic and config changes,
producer-id blocks, elections) into metadata records, commits them through the quorum and
answers once they are committed.

Each request is decided from the working image (the committed image with every batch this
controller proposed and awaits committing) in one synchronous step: the decision, the proposal
(one batch at the offset the driver appends next) and its replay into the working image, so
requests are decided one at a time, each seeing the records of those before it. The answer
waits for that batch to commit; a request that writes nothing waits for the last batch
proposed, as Kafka's "read after the last write". A node that is not active, loses the
leadership while a request waits, or sees the request's records lost answers NOT_CONTROLLER,
and reverts its working image to the committed one.

A new leader becomes active once its epoch start is committed (everything before it replayed);
a cluster without a metadata.version first gets the bootstrap records, as one batch. While
active, timers on its injected clock fence brokers whose sessions expire, rebalance preferred
leaders and elect leaders uncleanly where topics allow it (`controller_timers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as random_module
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_log.clock import SYSTEM_CLOCK
from spark_log.metadata import MetadataImage, MetadataRecord
from spark_log.metadata.records import AbortTransactionRecord
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .broker_heartbeats import BrokerHeartbeats
from .controller_apis import DecisionInput, decision_for, not_controller_response
from .controller_config import ControllerTimings
from .controller_log import ControllerLog
from .controller_result import ControllerResult
from .controller_settings import ControllerSettings
from .controller_timers import ControllerTimers
from .feature_control import bootstrap_records
from .metadata_loader import decode_batch
from .quorum_errors import DriverStoppedError, ProposalLostError
from .raft_driver import RaftDriver
from .replication_control import Random

__all__ = ["QuorumController"]

log = logging.getLogger(__name__)

BROKER_HEARTBEAT = 63  # BrokerHeartbeat's API key

DEFAULT_TIMINGS = ControllerTimings()
BOOTSTRAP_RECORDS: tuple[MetadataRecord, ...] = tuple(bootstrap_records())


@dataclass
class _Term:
    """This node's leadership of one epoch: `lost` is set when it ends."""

    epoch: int
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    started: bool = False  # the epoch start is committed


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark a wait's outcome seen (its error is handled where it is awaited, if anywhere)."""
    if not future.cancelled():
        future.exception()


class QuorumController:
    """The controller on one quorum member.

        controller = QuorumController(driver, settings)   # before driver.start()
        await driver.start()
        response = await controller.handle(create_topics_request)

    Invariants: only an active controller proposes; `image` is the committed image; every
    `handle` call ends with the request's response (NOT_CONTROLLER when it cannot be served);
    after `close` every request is answered NOT_CONTROLLER. Not thread-safe: everything runs on
    the driver's event loop.
    """

    def __init__(self, driver: RaftDriver, settings: ControllerSettings, *,
                 timings: ControllerTimings = DEFAULT_TIMINGS,
                 clock_ms: Callable[[], int] = SYSTEM_CLOCK.monotonic_ms,
                 random: Random | None = None,
                 bootstrap: Sequence[MetadataRecord] = BOOTSTRAP_RECORDS,
                 decode: Callable[[Batch], list[MetadataRecord]] = decode_batch) -> None:
        self._driver, self._settings = driver, settings
        self._clock_ms = clock_ms
        self._random = random or random_module.Random()
        self._bootstrap = tuple(bootstrap)
        self._log = ControllerLog(decode)
        self._heartbeats = BrokerHeartbeats(settings.broker_session_timeout_ms)
        self._timers = ControllerTimers(timings, settings, self._heartbeats, clock_ms=clock_ms,
                                        image=lambda: self._log.working.image,
                                        write=self._write)
        self._term: _Term | None = None
        self._active = False
        self._leader_id = -1
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        driver.on_commit(self._on_commit)
        driver.on_snapshot(self._on_snapshot)
        driver.on_leader_change(self._on_leader_change)

    # ---- what the node sees -----------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Leads the quorum, has replayed the log to its epoch start, bootstrap done."""
        return self._active and self._driver.is_leader

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self._log.committed

    @property
    def leader_id(self) -> int:
        """The quorum's leader, -1 when none is known."""
        return self._leader_id

    # ---- requests ---------------------------------------------------------------------------
    async def handle(self, request: Any) -> Any:
        """The response to a request the controller serves (a kio request entity of any
        version the decisions read; ValueError for another API)."""
        decide = decision_for(request)
        term = self._term
        if not self.active or term is None:
            return not_controller_response(request)
        result = decide(self._decision_input(), request)
        offset = self._write(result) if result.records else self._log.last_proposed
        if result.records and offset is None:
            return not_controller_response(request)
        self._timers.sessions_changed()
        if offset is None:
            return result.response
        # A broker waiting for its heartbeat's answer (perhaps behind a long apply sharing this
        # event loop) is alive: its session cannot expire meanwhile, and runs from the answer.
        beat = request.broker_id if request.__api_key__ == BROKER_HEARTBEAT else None
        self._heartbeats.waiting(beat, +1)
        try:
            committed = await self._until_committed(offset, term)
        finally:
            self._heartbeats.waiting(beat, -1)
        if not committed:
            return not_controller_response(request)
        if beat is not None and self.active:
            self._heartbeats.answered(beat, self._clock_ms())
            self._timers.sessions_changed()
        return result.response

    def _decision_input(self) -> DecisionInput:
        return DecisionInput(self._log.working, self._heartbeats, self._settings,
                             self._clock_ms(), self._driver.replica.log.end_offset,
                             self._random)

    def _write(self, result: ControllerResult[Any]) -> int | None:
        """Propose the result's records (at least one) as one batch and replay them into the
        working image; the batch's offset, None when this node cannot (it no longer leads: it
        then stops being active)."""
        self._log_unclean(result)
        return self._propose(result.records)

    def _propose(self, records: Sequence[MetadataRecord]) -> int | None:
        term, driver = self._term, self._driver
        if term is None or not driver.is_leader or driver.replica.epoch != term.epoch:
            self._renounce("it no longer leads")
            return None
        data = self._log.encode(records)
        offset = driver.replica.log.end_offset
        self._log.append(records, offset, term.epoch)
        try:
            proposed = driver.propose(data)
        except DriverStoppedError:
            proposed = None
        if proposed != offset:
            self._renounce("its proposal was refused")
            return None
        return offset

    async def _until_committed(self, offset: int, term: _Term) -> bool:
        """Until the batch proposed at `offset` commits (True) or this leadership ends or the
        batch is lost (False)."""
        commit = asyncio.ensure_future(self._driver.wait_committed(offset))
        commit.add_done_callback(_retrieve)
        lost = asyncio.ensure_future(term.lost.wait())
        try:
            await asyncio.wait((commit, lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not commit.done():
                commit.cancel()
        if not commit.done() or commit.cancelled():
            return False
        error = commit.exception()
        if error is None:
            return True
        if term is self._term:
            self._renounce(f"the batch it proposed at offset {offset} was not committed: "
                           f"{error}")
        return False

    def _log_unclean(self, result: ControllerResult[Any]) -> None:
        # One line per partition, so that an operator searching for a partition finds it.
        for topic, partition in result.unclean_elections:
            log.warning("Controller %d: unclean leader election for partition %s-%d: its new "
                        "leader was not in the ISR, so records acknowledged before may be lost",
                        self._driver.node_id, topic, partition)

    # ---- the quorum's news ------------------------------------------------------------------
    def _on_commit(self, batches: Sequence[Batch]) -> None:
        controller_log = self._log
        had_error = controller_log.error is not None
        for epoch in controller_log.committed_batches(batches):
            term = self._term
            if term is not None and epoch == term.epoch and not term.started:
                term.started = True
                self._epoch_started(term)
        if controller_log.error is not None and not had_error:
            log.error("Controller %d stopped replaying the metadata log %s; it will not be "
                      "active", self._driver.node_id, controller_log.error)
            self._renounce("its metadata log does not replay")

    def _on_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._log.load_snapshot(snapshot_id, data)

    def _on_leader_change(self, epoch: int, leader_id: int) -> None:
        self._leader_id = leader_id
        term = self._term
        if term is not None and (term.epoch != epoch or leader_id != self._driver.node_id):
            self._renounce(f"epoch {epoch} has leader {leader_id}")
        if leader_id == self._driver.node_id and self._term is None and not self._closed:
            self._term = _Term(epoch)

    # ---- leadership -------------------------------------------------------------------------
    def _epoch_started(self, term: _Term) -> None:
        """The epoch start is committed: write what activation calls for, then activate."""
        if self._log.error is not None:
            return
        records: list[MetadataRecord] = []
        if self._log.transactions.open:
            log.warning("Controller %d: the transaction begun at offset %d never ended; "
                        "aborting it", self._driver.node_id, self._log.transactions.begin_offset)
            records.append(AbortTransactionRecord(reason="controller failover"))
        if self._log.committed.metadata_version is None:
            log.info("Controller %d: the metadata log has no metadata.version; writing the "
                     "%d bootstrap records", self._driver.node_id, len(self._bootstrap))
            records.extend(self._bootstrap)
        if not records:
            self._activate(term)
            return
        offset = self._propose(records)
        if offset is not None:
            self._spawn(self._activate_once_committed(offset, term))

    async def _activate_once_committed(self, offset: int, term: _Term) -> None:
        if await self._until_committed(offset, term):
            self._activate(term)

    def _activate(self, term: _Term) -> None:
        if term is not self._term or self._closed:
            return
        self._active = True
        self._heartbeats.activate(self._log.working.image, self._clock_ms())
        log.info("Controller %d is active in epoch %d (committed offset %d)", self._driver.node_id,
                 term.epoch, self._log.committed.provenance.offset)
        self._timers.start()

    def _renounce(self, reason: str) -> None:
        """Stop being (or becoming) the active controller: drop what was not committed and
        answer every waiting request NOT_CONTROLLER."""
        term, self._term = self._term, None
        was_active, self._active = self._active, False
        self._timers.stop()
        self._log.revert()
        if term is not None:
            term.lost.set()
            if was_active:
                log.info("Controller %d is no longer active in epoch %d: %s", self._driver.node_id,
                         term.epoch, reason)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop: timers cancelled, waiting requests answered NOT_CONTROLLER; the driver is the
        caller's to close."""
        self._closed = True
        self._renounce("it is closing")
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, ProposalLostError,
                                     DriverStoppedError):
                await task
