"""The exceptions storage raises, each naming the Kafka error code the broker answers with.

Every class carries `error_name`, the name in Kafka's error table (`Errors` in the protocol), so
the broker can map any storage exception with `kafka_error_name(exc)` instead of a chain of
isinstance checks, and `record_errors`, the records a record-level check refused (KIP-467), which
the Produce response lists beside the error code. `CorruptRecordError` comes from the record
layer and is re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from spark_log.records.errors import CorruptRecordError

__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidConfigurationError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordError",
    "RecordTooLargeError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
    "kafka_error_name",
]


class RecordError(NamedTuple):
    """One record a batch was refused for (Kafka's ProduceResponse.RecordError): its index in
    the batch and why."""

    batch_index: int
    message: str | None


class StorageError(Exception):
    """Base of storage's own exceptions. Maps to UNKNOWN_SERVER_ERROR unless a subclass says.

    `record_errors` is empty unless record-level checks refused the batch; then it names every
    offending record, in batch order.
    """

    error_name = "UNKNOWN_SERVER_ERROR"
    record_errors: tuple[RecordError, ...] = ()


class KafkaStorageError(StorageError):
    """A write, fsync or read failed: the log directory is offline (fail-stop, never retried).

    Maps to KAFKA_STORAGE_ERROR (56). Once raised, every later operation on any log of the same
    data directory raises it again; only a restart (which runs recovery) brings the logs back.
    """

    error_name = "KAFKA_STORAGE_ERROR"


class OffsetOutOfRangeError(StorageError):
    """A fetch or DeleteRecords offset outside [log start offset, log end offset].

    Maps to OFFSET_OUT_OF_RANGE (1).
    """

    error_name = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(StorageError):
    """A batch larger than the topic's max.message.bytes. Maps to MESSAGE_TOO_LARGE (10)."""

    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StorageError):
    """An append larger than the topic's segment size. Maps to RECORD_LIST_TOO_LARGE (18)."""

    error_name = "RECORD_LIST_TOO_LARGE"


class _RecordLevelError(StorageError):
    """An error record-level checks may raise, carrying the refused records."""

    def __init__(self, message: str, record_errors: Sequence[RecordError] = ()) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class InvalidRecordError(_RecordLevelError):
    """A well-formed batch that breaks a rule of the append (control batch from a client, base
    offset not 0, inconsistent record count, several batches in one produce), or whose records
    break one (a null key on a compacted topic). Maps to INVALID_RECORD (87)."""

    error_name = "INVALID_RECORD"


class InvalidTimestampError(_RecordLevelError):
    """A record timestamp outside message.timestamp.before/after.max.ms of the broker's clock, or
    a producer that set LogAppendTime itself. Maps to INVALID_TIMESTAMP (32)."""

    error_name = "INVALID_TIMESTAMP"


class OffsetsOutOfOrderError(StorageError):
    """A replication append whose batch offsets do not increase. Maps to UNKNOWN_SERVER_ERROR,
    as Kafka's OffsetsOutOfOrderException does (it never reaches a client)."""


class UnexpectedAppendOffsetError(StorageError):
    """A replication append starting below the log end offset. Maps to UNKNOWN_SERVER_ERROR, as
    Kafka's UnexpectedAppendOffsetException does; carries the first and last offset given."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class InvalidConfigurationError(StorageError, ValueError):
    """An unknown topic config name or a value that does not parse or validate.

    Maps to INVALID_CONFIG (40). `config_name` names the offending key.
    """

    error_name = "INVALID_CONFIG"

    def __init__(self, message: str, config_name: str) -> None:
        super().__init__(message)
        self.config_name = config_name


class CorruptIndexError(StorageError):
    """An index file that fails its sanity check. Internal: storage rebuilds the index from the
    log and never lets this escape to the broker."""


class OutOfOrderSequenceError(StorageError):
    """A batch whose first sequence does not follow the producer's last one (a gap), or a new
    epoch not starting at sequence 0. Maps to OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""

    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    """A batch or marker from an epoch older than the producer's current one (a zombie).
    Maps to INVALID_PRODUCER_EPOCH (47), as Kafka answers produce requests since 2.7."""

    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer with an open transaction. Maps to
    INVALID_TXN_STATE (48)."""

    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than the one the partition has
    seen. Maps to TRANSACTION_COORDINATOR_FENCED (52)."""

    error_name = "TRANSACTION_COORDINATOR_FENCED"


def kafka_error_name(exc: BaseException) -> str:
    """The Kafka error name for an exception raised by storage (CORRUPT_MESSAGE for a corrupt
    batch, UNKNOWN_SERVER_ERROR for anything storage does not know)."""
    if isinstance(exc, CorruptRecordError):
        return "CORRUPT_MESSAGE"
    return getattr(exc, "error_name", "UNKNOWN_SERVER_ERROR")
