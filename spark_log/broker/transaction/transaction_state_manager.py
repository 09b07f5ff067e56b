"""The transaction coordinator's memory, kept as a replay of `__transaction_state` (Kafka's
TransactionStateManager).

A transactional id lives in partition `abs(javaHashCode(id)) % transaction.state.log.num.
partitions` (the same hash as groups). Every new state is first appended to that partition (one
record, origin COORDINATOR) and adopted in memory only once written, so memory never runs ahead
of the log; a failed append leaves memory as it was and raises `KafkaError` with the code Kafka
answers. At start every existing partition is replayed in the background; until a partition is
loaded, its ids answer COORDINATOR_LOAD_IN_PROGRESS. A damaged batch or record is skipped there,
logged at ERROR, and the rest loads (see `coordinator_loader`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spark_log.broker.coordinator.collaborators import TopicCreation
from spark_log.broker.coordinator.coordinator_loader import read_for_load
from spark_log.broker.errors import KafkaError, error_code_for
from spark_log.broker.group.offsets_topic import partition_for
from spark_log.broker.transaction.transaction_log_records import (
    TransactionLogError,
    TransactionLogValue,
    UnknownKeyVersionError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from spark_log.broker.transaction.transaction_metadata import TransactionMetadata, TxnState
from spark_log.protocol import ErrorCode
from spark_log.records import BatchHeader, Record, build_batch
from spark_log.storage.append_info import AppendOrigin

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.coordinator.collaborators import InternalTopics, PartitionLogs
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Append errors as the coordinator reports them (Kafka's TransactionStateManager).
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


class TransactionStateManager:
    """Invariants: an id is in `transactions` only while its partition is loaded here (or
    loading), and its metadata is the last value written for it. Event-loop only."""

    def __init__(self, config: BrokerConfig, clock: Clock, topics: InternalTopics,
                 logs: PartitionLogs) -> None:
        self.config = config
        self.clock = clock
        self.topics = topics
        self.logs = logs
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loading: set[int] = set()  # partitions being loaded
        self.loaded: set[int] = set()  # partitions whose ids are in memory
        existing = topics.partition_count(TRANSACTION_STATE_TOPIC)
        self.partitions: int = existing if existing is not None else \
            self.config.get("transaction.state.log.num.partitions")
        self.creation = TopicCreation(topics, TRANSACTION_STATE_TOPIC, lambda: self.partitions,
                                      self._topic_configs)

    # ---- the topic ------------------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.creation.exists()

    def ensure_topic(self) -> None:
        """`__transaction_state` is created on first use (FindCoordinator and InitProducerId
        await it, `create_topic`); until it exists, anything else is COORDINATOR_NOT_AVAILABLE."""
        if not self.topic_exists():
            self.creation.request()
            raise KafkaError(ErrorCode.coordinator_not_available,
                             f"{TRANSACTION_STATE_TOPIC} is being created")

    async def create_topic(self) -> None:
        await self.creation.create()

    def _topic_configs(self) -> dict[str, str]:
        """Kafka's configs of `__transaction_state`."""
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "segment.bytes": str(self.config.get("transaction.state.log.segment.bytes"))}

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions)

    def is_loading(self, transactional_id: str) -> bool:
        return self.partition_of(transactional_id) in self.loading

    def owns(self, transactional_id: str) -> bool:
        """Whether the id's partition is loaded here (this broker coordinates the id)."""
        return self.partition_of(transactional_id) in self.loaded

    def unload(self, partition: int) -> None:
        """Forget the ids of `partition` (another broker leads it now)."""
        for transactional_id in [t for t in self.transactions
                                 if self.partition_of(t) == partition]:
            del self.transactions[transactional_id]

    # ---- writing --------------------------------------------------------------------------
    def write(self, new: TransactionMetadata) -> None:
        """Append `new` to the id's partition, then adopt it."""
        value = None if new.state == TxnState.DEAD else encode_value(_value_of(new))
        partition = self.partition_of(new.transactional_id)
        batch = build_batch([Record(0, self.clock.now_ms(),
                                    encode_key(new.transactional_id), value)])
        try:
            self.ensure_topic()
            self.logs.append(TRANSACTION_STATE_TOPIC, partition, batch,
                                        origin=AppendOrigin.COORDINATOR)
        except Exception as e:
            code = error_code_for(e)
            log.error("Cannot append to %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, e)
            raise KafkaError(_APPEND_ERRORS.get(code, ErrorCode.unknown_server_error)) from e
        if new.state == TxnState.DEAD:
            self.transactions.pop(new.transactional_id, None)
        else:
            self.transactions[new.transactional_id] = new

    # ---- loading --------------------------------------------------------------------------
    async def load(self, partition: int) -> list[TransactionMetadata]:
        """Replay one partition; returns the loaded transactions that were preparing (their
        markers must be written again). A batch or record that cannot be read is skipped
        (logged): its ids keep the state of their last readable record."""
        partition_log = self.logs.log(TRANSACTION_STATE_TOPIC, partition)
        name = f"{TRANSACTION_STATE_TOPIC}-{partition}"
        loaded: dict[str, TransactionMetadata | None] = {}
        async for batch, start in read_for_load(partition_log, name):
            if batch.header.is_control:
                continue
            for record in batch.records:
                if record.offset >= start:
                    _load_record(name, batch.header, record, loaded)
        for transactional_id, metadata in loaded.items():
            if metadata is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = metadata
        return [m for m in loaded.values() if m is not None and
                m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]


def _load_record(name: str, header: BatchHeader, record: Record,
                 loaded: dict[str, TransactionMetadata | None]) -> None:
    """Put the state `record` holds into `loaded` (None: a tombstone); log and skip a record
    that does not parse. An unknown key version is a newer broker's record: skipped with a
    warning, as Kafka does."""
    if record.key is None:
        log.error("%s: record at offset %d (batch %d..%d) has no key and is skipped", name,
                  record.offset, header.base_offset, header.last_offset)
        return
    transactional_id = None
    try:
        transactional_id = decode_key(record.key)
        loaded[transactional_id] = None if record.value is None else \
            _metadata_of(transactional_id, decode_value(record.value))
    except UnknownKeyVersionError as e:
        log.warning("%s: record at offset %d ignored: %s; it could be a left over from an "
                    "aborted upgrade", name, record.offset, e)
    except TransactionLogError as e:
        whose = "" if transactional_id is None else \
            f" for transactional id {transactional_id!r} (its earlier state is kept)"
        log.error("%s: record at offset %d (batch %d..%d)%s cannot be read and is skipped: %s",
                  name, record.offset, header.base_offset, header.last_offset, whose, e)


def _value_of(m: TransactionMetadata) -> TransactionLogValue:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        topics.setdefault(topic, []).append(partition)
    return TransactionLogValue(m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state),
                               {t: tuple(p) for t, p in topics.items()}, m.last_update_ms,
                               m.start_ms)


def _metadata_of(transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
    """The metadata a stored value describes; TransactionLogError for a state id that is not
    one of Kafka's."""
    try:
        state = TxnState(v.state)
    except ValueError:
        raise TransactionLogError(f"unknown transaction state {v.state}") from None
    partitions = frozenset((t, p) for t, ids in v.partitions.items() for p in ids)
    return TransactionMetadata(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms,
                               state, partitions, v.start_ms, v.last_update_ms)
