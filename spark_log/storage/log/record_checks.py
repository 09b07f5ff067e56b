"""Record-level hooks of storage, built on the record decoder: timestamp search inside a batch
and the record checks of a leader append (Kafka's LogValidator.validateRecord and
processRecordErrors: a key on every record of a compacted topic, each record's timestamp, and
the refusal naming every offending record, KIP-467).

Both only decode what they must: the search decodes the one batch a lookup narrowed to; the
log validator calls the checks only for batches their header cannot settle, and a key check
alone reads keys without values or headers. Messages are Kafka's, word for word, so clients
show the same text; numbers follow Java's long arithmetic, as Kafka's do.
"""

from __future__ import annotations

from spark_log.records.batch_header import BatchHeader, TimestampType
from spark_log.records.record import Record
from spark_log.records.record_batch import BatchView, iter_batches
from spark_log.storage.errors import InvalidRecordError, InvalidTimestampError, RecordError
from spark_log.storage.log.log_config import LogConfig

NO_TIMESTAMP = -1
_SHOWN_ERRORS = 3  # in the message of an INVALID_RECORD refusal, as Kafka shows


class RecordTimestampSearch:
    """`RecordSearch` that looks at each record's timestamp. Stateless."""

    def first_at_or_after(self, batch: bytes, header: BatchHeader, target_timestamp: int,
                          min_offset: int) -> tuple[int, int] | None:
        if header.max_timestamp < target_timestamp or header.last_offset < min_offset:
            return None
        for record in _only(batch).records(verify_crc=False):
            if record.offset >= min_offset and record.timestamp >= target_timestamp:
                return record.offset, record.timestamp
        return None

    def offset_of_max_timestamp(self, batch: bytes, header: BatchHeader) -> int:
        for record in _only(batch).records(verify_crc=False):
            if record.timestamp == header.max_timestamp:
                return record.offset
        return header.base_offset


def validate_records(batch: memoryview, header: BatchHeader, *, config: LogConfig, now_ms: int,
                     topic_partition: str, check_timestamps: bool) -> None:
    """`RecordValidator`: Kafka's checks of each record of a leader batch. A record with a null
    key on a compacted topic is refused for that; otherwise, when `check_timestamps`, for its
    timestamp. Any refused record refuses the batch: InvalidTimestampError if a timestamp was
    wrong, else InvalidRecordError, listing every refused record."""
    view = BatchView(batch, 0, header)
    if check_timestamps:
        errors, bad_timestamp = _check_each_record(view, config, now_ms, topic_partition)
    elif config.compact and not header.is_control:
        errors, bad_timestamp = _null_keys(view, topic_partition), False
    else:
        return
    if errors:
        raise _refusal(errors, bad_timestamp)


def _null_keys(view: BatchView, tp: str) -> list[RecordError]:
    message = _no_key_message(tp)
    return [RecordError(index, message)
            for index, key in enumerate(view.keys(verify_crc=False)) if key is None]


def _check_each_record(view: BatchView, config: LogConfig, now: int,
                       tp: str) -> tuple[list[RecordError], bool]:
    """Each record's error, as Kafka's validateRecord: the key first, then the timestamp.
    Returns the errors and whether any is a timestamp's."""
    h = view.header
    compact, lat_batch = config.compact, h.timestamp_type is TimestampType.LOG_APPEND_TIME
    create_time = config.message_timestamp_type == "CreateTime"
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    bounds = f"[{_long(now - before)}, {_long(now + after)}]"
    errors: list[RecordError] = []
    bad_timestamp = False
    for index, record in enumerate(view.records(verify_crc=False)):
        if compact and record.key is None:
            errors.append(RecordError(index, _no_key_message(tp)))
            continue
        ts = _long(record.timestamp)
        if create_time and ts != NO_TIMESTAMP:
            diff = _long(now - ts)
            if diff <= before and _long(-diff) <= after:
                continue
            message = (f"Timestamp {ts} of message with offset {record.offset} is out of range. "
                       f"The timestamp should be within {bounds}")
        elif lat_batch:
            message = (f"Invalid timestamp type in message {_describe(record, h, config)}. "
                       f"Producer should not set timestamp type to LogAppendTime.")
        else:
            continue
        errors.append(RecordError(index, message))
        bad_timestamp = True
    return errors, bad_timestamp


def _no_key_message(tp: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {tp}"


def _describe(record: Record, h: BatchHeader, config: LogConfig) -> str:
    """The record as Kafka's toString shows it. A compressed batch kept in its codec is read
    with Kafka's key/value-skipping iterator, whose records show raw lengths (-1 for null)."""
    key, value, codec = record.key, record.value, h.compression
    if codec and config.compression_type in ("producer", codec.name.lower()):
        return (f"PartialDefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
                f"key={-1 if key is None else len(key)} bytes, "
                f"value={-1 if value is None else len(value)} bytes)")
    return (f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
            f"key={len(key or b'')} bytes, value={len(value or b'')} bytes)")


def _refusal(errors: list[RecordError],
             bad_timestamp: bool) -> InvalidRecordError | InvalidTimestampError:
    """Kafka's processRecordErrors: the batch's error and message for its refused records."""
    if bad_timestamp:
        return InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(map(_java_string, errors[:_SHOWN_ERRORS]))
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", errors)


def _java_string(error: RecordError) -> str:
    message = "null" if error.message is None else f"'{error.message}'"
    return f"RecordError(batchIndex={error.batch_index}, message={message})"


def _long(value: int) -> int:
    """`value` wrapped to a Java long, as Kafka's arithmetic on timestamps wraps."""
    return (value + 2**63) % 2**64 - 2**63


RECORD_TIMESTAMP_SEARCH = RecordTimestampSearch()


def _only(batch: bytes | memoryview) -> BatchView:
    return next(iter_batches(batch))
