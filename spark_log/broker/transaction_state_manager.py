"""The transaction coordinator's memory, kept as a replay of `__transaction_state` (Kafka's
TransactionStateManager).

A transactional id lives in partition `abs(javaHashCode(id)) % transaction.state.log.num.
partitions` (the same hash as groups). Every new state is first appended to that partition (one
record, origin COORDINATOR) and adopted in memory only once written, so memory never runs ahead
of the log; a failed append leaves memory as it was and raises `KafkaError` with the code Kafka
answers. At start every existing partition is replayed in the background; until a partition is
loaded, its ids answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from spark_log.protocol import ErrorCode
from spark_log.records import Record, build_batch, iter_batches
from spark_log.storage.append_info import AppendOrigin

from .errors import KafkaError, error_code_for
from .offsets_topic import partition_for
from .transaction_log_records import (
    TransactionLogError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from .transaction_metadata import TransactionMetadata, TxnState

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
LOAD_CHUNK_BYTES = 1 << 20
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
    """Invariants: an id is in `transactions` only once its partition has loaded, and its
    metadata is the last value written for it. Event-loop only."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loading: set[int] = set()
        existing = broker.topics.metadata.get(TRANSACTION_STATE_TOPIC)
        self.partitions: int = existing.partitions if existing else \
            self.config.get("transaction.state.log.num.partitions")

    # ---- the topic ------------------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.broker.topics.metadata.get(TRANSACTION_STATE_TOPIC) is not None

    def ensure_topic(self) -> None:
        """Create `__transaction_state` on first use, with Kafka's topic configs."""
        if not self.topic_exists():
            self.broker.topics.ensure_internal(TRANSACTION_STATE_TOPIC, self.partitions, {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "segment.bytes": str(self.config.get("transaction.state.log.segment.bytes")),
            })

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions)

    def is_loading(self, transactional_id: str) -> bool:
        return self.partition_of(transactional_id) in self.loading

    # ---- writing --------------------------------------------------------------------------
    def write(self, new: TransactionMetadata) -> None:
        """Append `new` to the id's partition, then adopt it."""
        value = None if new.state == TxnState.DEAD else encode_value(_value_of(new))
        partition = self.partition_of(new.transactional_id)
        batch = build_batch([Record(0, self.broker.clock.now_ms(),
                                    encode_key(new.transactional_id), value)])
        try:
            self.ensure_topic()
            self.broker.replicas.append(TRANSACTION_STATE_TOPIC, partition, batch,
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
        markers must be written again)."""
        partition_log = self.broker.replicas.log(TRANSACTION_STATE_TOPIC, partition)
        offset, end = partition_log.log_start_offset, partition_log.log_end_offset
        loaded: dict[str, TransactionMetadata | None] = {}
        while offset < end:
            data = partition_log.read(offset, LOAD_CHUNK_BYTES, max_offset=end).read_bytes()
            if not data:
                break
            for key, value in _records(data, offset):
                loaded[key] = value
            offset = _next_offset(data, offset)
            await asyncio.sleep(0)
        for transactional_id, metadata in loaded.items():
            if metadata is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = metadata
        return [m for m in loaded.values() if m is not None and
                m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]


def _records(data: bytes, start: int) -> Iterator[tuple[str, TransactionMetadata | None]]:
    for batch in iter_batches(data):
        if batch.header.is_control or batch.header.next_offset <= start:
            continue
        for record in batch.decode().records:
            if record.offset < start or record.key is None:
                continue
            try:
                key = decode_key(record.key)
                value = None if record.value is None else decode_value(record.value)
            except (TransactionLogError, UnicodeDecodeError) as e:
                log.error("%s: unreadable record at offset %d skipped: %s",
                          TRANSACTION_STATE_TOPIC, record.offset, e)
                continue
            yield key, None if value is None else _metadata_of(key, value)


def _next_offset(data: bytes, offset: int) -> int:
    for batch in iter_batches(data):
        offset = max(offset, batch.header.next_offset)
    return offset


def _value_of(m: TransactionMetadata) -> TransactionLogValue:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        topics.setdefault(topic, []).append(partition)
    return TransactionLogValue(m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state),
                               {t: tuple(p) for t, p in topics.items()}, m.last_update_ms,
                               m.start_ms)


def _metadata_of(transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
    partitions = frozenset((t, p) for t, ids in v.partitions.items() for p in ids)
    return TransactionMetadata(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms,
                               TxnState(v.state), partitions, v.start_ms, v.last_update_ms)
