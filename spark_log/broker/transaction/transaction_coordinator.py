"""The transaction coordinator (Kafka's TransactionCoordinator): InitProducerId for
transactional ids, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, aborting timed-out
transactions, expiring idle transactional ids, and the views ListTransactions and
DescribeTransactions use.

Everything runs on the broker's event loop and every append is synchronous, so one request's
transitions (e.g. PrepareCommit, its markers, CompleteCommit) happen without another request in
between; CONCURRENT_TRANSACTIONS is answered only while a transaction's markers could not all be
written (they are retried by the periodic task) or, after a restart, before they are rewritten.

Ending a transaction from another process: EndTxn is accepted from any connection that names
the transactional id with its current producer id and epoch; only InitProducerId (which aborts
an open transaction) or the transaction timeout end it otherwise. A commit retried after it
succeeded answers NONE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from spark_log.broker.coordinator.coordinator_partitions import CoordinatorPartitions
from spark_log.broker.errors import KafkaError
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.broker.transaction.transaction_markers import (
    MarkerChannel,
    OtherBrokers,
    send_markers,
    write_marker,
    write_markers,
)
from spark_log.broker.transaction.transaction_metadata import (
    COMPLETE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    PREPARING,
    ProducerIdAndEpoch,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)
from spark_log.broker.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC,
    TransactionStateManager,
)
from spark_log.protocol import ErrorCode

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.coordinator.collaborators import InternalTopics, PartitionLogs
    from spark_log.broker.transaction.collaborators import (
        ProducerIdSource,
        TransactionalOffsets,
    )
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

MARKER_ATTEMPTS = 5  # markers sent to other brokers before the periodic retry takes over
MARKER_BACKOFF_S = 0.1
MARKER_REPLICATION_WAIT_S = 5.0  # markers written here, until on every in-sync replica


class TransactionCoordinator:
    """Invariant: a transactional id's in-memory metadata is the last state written for it to
    `__transaction_state`. Event-loop only."""

    def __init__(self, config: BrokerConfig, clock: Clock, topics: InternalTopics,
                 logs: PartitionLogs, groups: TransactionalOffsets,
                 producer_ids: ProducerIdSource, node_id: int = -1,
                 brokers: OtherBrokers | None = None) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.producer_ids = producer_ids
        self.state = TransactionStateManager(config, clock, topics, logs)
        self.markers = MarkerChannel(groups, logs, clock, node_id, brokers)
        self._active = False
        self.partitions = CoordinatorPartitions(self._load, self._unload, self.state.loading,
                                                self.state.loaded)
        self._sending: dict[str, asyncio.Task[None]] = {}  # markers on their way, by id

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.state.transactions

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Serve requests; the `__transaction_state` partitions this broker leads load in the
        background."""
        self._active = True
        self.partitions.start()

    async def stop(self) -> None:
        self._active = False
        await self.partitions.stop()
        sending = list(self._sending.values())
        for task in sending:
            task.cancel()
        await asyncio.gather(*sending, return_exceptions=True)

    # ---- leadership of __transaction_state partitions (from the metadata) -----------------
    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads `partition`: load its transactional ids."""
        self.partitions.elected(partition, leader_epoch)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads `partition` now (or nobody does): forget its ids."""
        if self.partitions.resigned(partition):
            log.info("%s-%d is led by another broker now: its transactional ids are unloaded",
                     TRANSACTION_STATE_TOPIC, partition)

    def _unload(self, partition: int) -> None:
        for transactional_id in [t for t in self._sending
                                 if self.state.partition_of(t) == partition]:
            self._sending.pop(transactional_id).cancel()
        self.state.unload(partition)

    async def _load(self, partition: int) -> bool:
        try:
            preparing = await self.state.load(partition)
        except NotLeaderError:
            log.info("%s-%d is led by another broker: its transactional ids are not loaded "
                     "here", TRANSACTION_STATE_TOPIC, partition)
            return False
        except Exception:
            log.exception("Loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            preparing = []
        log.info("Loaded %s-%d: %d transactional ids here", TRANSACTION_STATE_TOPIC, partition,
                 len(self.transactions))
        await self._groups_loaded()
        for metadata in preparing:  # decided before the restart: finish them
            try:
                self._finish(metadata)
            except Exception:
                log.exception("Finishing the transaction of %s failed",
                              metadata.transactional_id)
        return True

    async def _groups_loaded(self) -> None:
        """Markers for __consumer_offsets must wait until the group coordinator has replayed
        it, or the pending offsets it replays later would miss their marker."""
        while not self.groups.loaded():
            await asyncio.sleep(0.01)

    def loaded(self) -> bool:
        return not self.state.loading

    async def prepare(self) -> ErrorCode:
        """InitProducerId first: `__transaction_state` exists (created on first use through
        the controller, awaited here)."""
        try:
            await self.state.create_topic()
        except Exception as e:
            log.error("Cannot create %s: %s", TRANSACTION_STATE_TOPIC, e)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """FindCoordinator for a transactional id: (error, its `__transaction_state`
        partition), the topic created on first use; on the partition's leader the answer
        waits (bounded) for the partition to load."""
        error = await self.prepare()
        if error != ErrorCode.none or not self._active:
            return error if error != ErrorCode.none else ErrorCode.coordinator_not_available, -1
        partition = self.state.partition_of(transactional_id)
        await self.partitions.until_loaded(partition)
        return ErrorCode.none, partition

    def ensure_ready(self, transactional_id: str | None) -> None:
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "transactional id must not be empty")
        if not self._active:
            raise KafkaError(ErrorCode.coordinator_not_available)
        self.state.ensure_topic()
        if self.state.is_loading(transactional_id):
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        if not self.state.owns(transactional_id):
            raise KafkaError(ErrorCode.not_coordinator)

    # ---- InitProducerId ---------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: ProducerIdAndEpoch | None) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer: bumps the epoch (fencing any
        older producer of the id and aborting its open transaction), or a new producer id once
        the epoch is exhausted. Raises KafkaError."""
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "transactional id must not be empty")
        if not 0 < timeout_ms <= self.config.get("transaction.max.timeout.ms"):
            raise KafkaError(ErrorCode.invalid_transaction_timeout)
        self.ensure_ready(transactional_id)
        metadata = self.transactions.get(transactional_id) or TransactionMetadata(
            transactional_id, self.producer_ids.next_id(), NO_PRODUCER_EPOCH, timeout_ms)
        if expected is not None and not _may_reinit(metadata, expected):
            raise KafkaError(ErrorCode.producer_fenced)
        if metadata.state in PREPARING:
            raise KafkaError(ErrorCode.concurrent_transactions)
        if metadata.state == TxnState.ONGOING:
            # Fence the current producer: abort its transaction with a bumped epoch, then
            # bump again for the caller (what Kafka's client does on CONCURRENT_TRANSACTIONS).
            metadata = self._abort_with_fence(metadata)
            if metadata.state != TxnState.COMPLETE_ABORT:
                raise KafkaError(ErrorCode.concurrent_transactions)
        now = self.clock.now_ms()
        if metadata.epoch_exhausted and (expected is None or
                                         expected.epoch == metadata.producer_epoch):
            new = metadata.rotate_producer_id(now, timeout_ms, self.producer_ids.next_id(),
                                              keep_last_epoch=expected is not None)
        else:
            epoch, last = _bumped_epoch(metadata, expected)
            new = metadata.bump_epoch(now, timeout_ms, epoch, last)
        self.state.write(new)
        log.info("Initialized transactional id %s with producer id %d and epoch %d on "
                 "partition %s-%d", transactional_id, new.producer_id, new.producer_epoch,
                 TRANSACTION_STATE_TOPIC, self.state.partition_of(transactional_id))
        return new.producer_id, new.producer_epoch

    # ---- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------
    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition]) -> None:
        """Add partitions to the producer's transaction (opening it). Raises KafkaError."""
        self.ensure_ready(transactional_id)
        metadata = self._current(transactional_id, producer_id, epoch)
        added = frozenset(partitions)
        if metadata.state in PREPARING:
            raise KafkaError(ErrorCode.concurrent_transactions)
        if metadata.state == TxnState.ONGOING and added <= metadata.partitions:
            return
        self.state.write(metadata.add_partitions(self.clock.now_ms(), added))

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                    group_id: str) -> None:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        self.add_partitions(transactional_id, producer_id, epoch,
                            [(OFFSETS_TOPIC, self.groups.partition_for(group_id))])

    def _current(self, transactional_id: str, producer_id: int, epoch: int
                 ) -> TransactionMetadata:
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping)
        if metadata.producer_epoch != epoch:
            raise KafkaError(ErrorCode.producer_fenced)
        return metadata

    # ---- EndTxn -----------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                        commit: bool) -> None:
        """EndTxn: commit or abort the open transaction of (producer id, epoch), from any
        connection. Raises KafkaError (NONE is not raised: a retry of a completed end)."""
        self.ensure_ready(transactional_id)
        metadata = self._current(transactional_id, producer_id, epoch)
        state = metadata.state
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        wanted_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if state == TxnState.ONGOING:
            prepared = metadata.prepare_end(self.clock.now_ms(), commit, epoch)
            self.state.write(prepared)  # the decision is durable: the rest is retried
            self._finish(prepared)
        elif state == wanted_complete:
            return
        elif state == wanted_prepare:
            raise KafkaError(ErrorCode.concurrent_transactions)
        else:
            log.info("EndTxn %s of %s in state %s: INVALID_TXN_STATE",
                     "commit" if commit else "abort", transactional_id, state.display_name)
            raise KafkaError(ErrorCode.invalid_txn_state)

    def _abort_with_fence(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """Abort an open transaction at a bumped epoch, so its producer is fenced."""
        epoch = min(metadata.producer_epoch + 1, MAX_EPOCH)
        prepared = metadata.prepare_end(self.clock.now_ms(), False, epoch)
        self.state.write(prepared)
        return self._finish(prepared)

    def _finish(self, prepared: TransactionMetadata) -> TransactionMetadata:
        """Write the markers of a preparing transaction, then complete it; returns the state
        reached (still preparing if a marker must be retried, or is on its way to another
        broker — the transaction completes when that broker has written it)."""
        if prepared.transactional_id in self._sending:
            return prepared
        commit = prepared.state == TxnState.PREPARE_COMMIT
        retry, remote = write_markers(self.markers, prepared.partitions, prepared.producer_id,
                                      prepared.producer_epoch, commit)
        if retry:
            return prepared
        sent_away = {tp for partitions in remote.values() for tp in partitions}
        local = [tp for tp in prepared.partitions if tp not in sent_away]
        if remote or self._replicating(local):
            self._sending[prepared.transactional_id] = asyncio.create_task(
                self._send_then_complete(prepared, remote, commit, local))
            return prepared
        return self._complete(prepared)

    def _replicating(self, partitions: list[TopicPartition]) -> bool:
        pending = getattr(self.markers.logs, "coordinator_writes_pending", None)
        return pending is not None and pending(partitions)

    async def _send_then_complete(self, prepared: TransactionMetadata,
                                  remote: dict[int, list[TopicPartition]], commit: bool,
                                  local: list[TopicPartition] | None = None) -> None:
        """Wait until the markers written here are on every in-sync replica, send those other
        brokers lead (again at their current leaders, a few times), then complete the
        transaction; left preparing — for the periodic retry — otherwise."""
        transactional_id = prepared.transactional_id
        try:
            if local and self._replicating(local) and not await \
                    self.markers.logs.coordinator_writes_replicated(  # type: ignore[attr-defined]
                        MARKER_REPLICATION_WAIT_S, local):
                return
            if remote and not await self._send_remote(prepared, remote, commit):
                return
            if self.transactions.get(transactional_id) is prepared:
                self._sending.pop(transactional_id, None)
                self._complete(prepared)
        finally:
            if self._sending.get(transactional_id) is asyncio.current_task():
                del self._sending[transactional_id]

    async def _send_remote(self, prepared: TransactionMetadata,
                           remote: dict[int, list[TopicPartition]], commit: bool) -> bool:
        """Send the markers other brokers lead, again at their current leaders a few times;
        whether every one was written."""
        for attempt in range(MARKER_ATTEMPTS):
            retry = await send_markers(self.markers, remote, prepared.producer_id,
                                       prepared.producer_epoch, commit)
            if not retry:
                return True
            await asyncio.sleep(MARKER_BACKOFF_S * (attempt + 1))
            failed_here, remote = write_markers(self.markers, retry, prepared.producer_id,
                                                prepared.producer_epoch, commit)
            if failed_here:
                return False
        return False

    def _complete(self, prepared: TransactionMetadata) -> TransactionMetadata:
        commit = prepared.state == TxnState.PREPARE_COMMIT
        completed = prepared.complete_end(self.clock.now_ms())
        try:
            self.state.write(completed)
        except KafkaError as e:
            log.error("Cannot complete the transaction of %s: %s", prepared.transactional_id,
                      e.code.name)
            return prepared
        log.info("%s the transaction of %s (producer id %d, epoch %d, %d partitions)",
                 "Committed" if commit else "Aborted", prepared.transactional_id,
                 prepared.producer_id, prepared.producer_epoch, len(prepared.partitions))
        return completed

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int) -> ErrorCode:
        """WriteTxnMarkers from a tool: one marker, answered with the error Kafka gives."""
        return write_marker(self.markers, topic, partition, producer_id, producer_epoch, commit,
                            coordinator_epoch)

    # ---- periodic work ----------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> None:
        """Abort (with an epoch bump that fences the producer) every transaction open longer
        than its timeout, and retry the markers of transactions stuck preparing."""
        if not self._active or not self.groups.loaded():
            return
        now = self.clock.now_ms()
        for metadata in list(self.transactions.values()):
            if self.state.is_loading(metadata.transactional_id):
                continue
            try:
                if metadata.is_timed_out(now):
                    log.info("Aborting transaction of %s (producer id %d): open for %d ms, "
                             "more than its timeout of %d ms", metadata.transactional_id,
                             metadata.producer_id, now - metadata.start_ms, metadata.timeout_ms)
                    self._abort_with_fence(metadata)
                elif metadata.state in PREPARING:
                    self._finish(metadata)
            except KafkaError as e:
                log.error("Cannot abort the transaction of %s: %s", metadata.transactional_id,
                          e.code.name)

    def expire_transactional_ids(self) -> None:
        """Forget ids idle for transactional.id.expiration.ms (a tombstone in the log)."""
        if not self._active:
            return
        now = self.clock.now_ms()
        max_idle = self.config.get("transactional.id.expiration.ms")
        for metadata in list(self.transactions.values()):
            if metadata.state in COMPLETE and now - metadata.last_update_ms >= max_idle and \
                    not self.state.is_loading(metadata.transactional_id):
                try:
                    self.state.write(metadata.transition(TxnState.DEAD, now))
                except KafkaError:
                    continue
                log.info("Transactional id %s expired", metadata.transactional_id)


def _may_reinit(metadata: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """KIP-360: a producer naming its id and epoch may re-initialize unless another producer
    has taken over the transactional id since."""
    return (metadata.producer_epoch == NO_PRODUCER_EPOCH
            or expected.producer_id == metadata.producer_id
            or (expected.producer_id == metadata.last_producer_id
                and expected.epoch >= MAX_EPOCH - 1))


def _bumped_epoch(metadata: TransactionMetadata, expected: ProducerIdAndEpoch | None
                  ) -> tuple[int, int]:
    """(new epoch, last epoch) as Kafka's prepareIncrementProducerEpoch decides them."""
    current = metadata.producer_epoch
    if expected is None:
        return current + 1, NO_PRODUCER_EPOCH
    if current == NO_PRODUCER_EPOCH or expected.epoch == current:
        return current + 1, current
    if expected.epoch == metadata.last_producer_epoch:  # a retry of a bump that succeeded
        return current, metadata.last_producer_epoch
    raise KafkaError(ErrorCode.producer_fenced)
