"""Validating an append and assigning its offsets, from batch headers alone (Kafka's LogValidator
plus UnifiedLog's analyzeAndValidateRecords).

Every batch of the request is checked before anything is written; one bad batch rejects the
whole append with one exception saying why. A produce request's one batch is checked by
`records.client_batch` in one native call when the extension is built; whatever that call
leaves undecided (and every check without the extension) takes the walk below.

Offsets and the leader epoch lie outside the CRC, so they are patched into a 61-byte copy of
each header while the records stay where they are (no copy of the payload); LogAppendTime topics
also rewrite the max timestamp and attributes, and recompute the CRC over the new header and
the untouched records.

Record-level checks (Kafka's validateRecord: a key on every record of a compacted topic, each
record's timestamp) need the record decoder: `RecordValidator` is the hook for them
(`record_checks.validate_records`). It runs only when the header cannot settle the batch: on
compacted topics, and when the header does not prove every timestamp valid. With the default
message.timestamp.before.max.ms (Long.MAX_VALUE, no lower bound) a batch whose max timestamp is
within the upper bound is proven valid, so the common produce decodes nothing. Without the hook,
timestamps are checked on what the header shows (first and max timestamp).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from spark_log.records.batch_header import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    TimestampType,
    iter_headers,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    verify_crc,
)
from spark_log.records.client_batch import check_client_batch
from spark_log.records.crc import crc32c
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from spark_log.storage.filesystem import Buffer
from spark_log.storage.log.log_config import LONG_MAX, LogConfig

NO_TIMESTAMP = -1


class RecordValidator(Protocol):
    """Record-level checks of one batch of a leader append. Checks every record (its key when
    `config.compact`, its timestamp when `check_timestamps`) and refuses the whole batch with
    InvalidRecordError or InvalidTimestampError whose `record_errors` name each offending
    record; returns None when all pass."""

    def __call__(self, batch: memoryview, header: BatchHeader, *, config: LogConfig,
                 now_ms: int, topic_partition: str, check_timestamps: bool) -> None: ...


@dataclass
class ValidatedAppend:
    """What to write (`buffers`, in order) and the final headers, offsets assigned."""

    buffers: list[Buffer] = field(default_factory=list)
    headers: list[BatchHeader] = field(default_factory=list)
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = -1
    log_append_time: int = NO_TIMESTAMP
    record_count: int = 0
    size: int = 0

    @property
    def first_offset(self) -> int:
        return self.headers[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.headers[-1].last_offset


def validate_append(records: Buffer, *, config: LogConfig, origin: AppendOrigin,
                    next_offset: int, leader_epoch: int, now_ms: int, topic_partition: str,
                    record_validator: RecordValidator | None = None) -> ValidatedAppend:
    """Check `records` (concatenated v2 batches) and return them with offsets assigned.

    Leader appends (CLIENT, COORDINATOR) must be one batch, get offsets from `next_offset` and
    `leader_epoch`; REPLICATION keeps offsets, which must increase and start at or after
    `next_offset`. Raises CorruptRecordError, InvalidRecordError, InvalidTimestampError,
    RecordTooLargeError, RecordBatchTooLargeError, OffsetsOutOfOrderError or
    UnexpectedAppendOffsetError; nothing is modified when it raises.
    """
    view = memoryview(records).cast("B")
    tp = topic_partition
    if origin is AppendOrigin.CLIENT:  # a produce request: one batch, checked in one call
        checked = check_client_batch(view, config.max_message_bytes, next_offset, leader_epoch)
        if checked is not None:
            final, header = checked  # only the offsets and leader epoch differ from the batch's
            _check_records(view, 0, final, config, now_ms, tp, record_validator)
            _check_segment_size(final.size, config, tp)
            if config.message_timestamp_type == "LogAppendTime":
                return _assign(view, 0, final, config, next_offset, leader_epoch, now_ms)
            return _assigned(view, header, final)
    if not view:
        raise InvalidRecordError(f"append to {tp} has no record batches")
    first = read_header(view)
    # one batch (every produce request) needs no walk
    batches = [(0, first)] if first.size == len(view) else list(iter_headers(view))
    leader = origin is not AppendOrigin.REPLICATION
    if leader and len(batches) > 1:
        raise InvalidRecordError(f"append to {tp} holds {len(batches)} record batches; a "
                                 f"produce request may carry one batch per partition")
    last_offset = -1
    for pos, h in batches:
        if origin is AppendOrigin.CLIENT:
            _check_client_batch(h, tp)
        if leader and h.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {h.size} bytes which exceeds "
                f"the maximum configured value of {config.max_message_bytes}.")
        verify_crc(view, pos, h)
        if not leader and h.last_offset <= last_offset:
            raise OffsetsOutOfOrderError(f"Out of order offsets found in append to {tp}: "
                                         f"{h.base_offset} follows {last_offset}")
        last_offset = h.last_offset
        if leader:
            _check_records(view, pos, h, config, now_ms, tp, record_validator)
    size = batches[-1][0] + batches[-1][1].size
    _check_segment_size(size, config, tp)
    if leader:  # one batch (more were refused above)
        return _assign(view, *batches[0], config, next_offset, leader_epoch, now_ms)
    if first.base_offset < next_offset:
        raise UnexpectedAppendOffsetError(
            f"Unexpected offset in append to {tp}. First offset {first.base_offset} is less "
            f"than the next offset {next_offset}.", first.base_offset, last_offset)
    out = ValidatedAppend(buffers=[view], size=size)
    for _, h in batches:
        _add(out, h)
    return out


def _check_segment_size(size: int, config: LogConfig, tp: str) -> None:
    if size > config.segment_size:
        raise RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {tp}, which exceeds "
            f"the maximum configured segment size of {config.segment_size}.")


def _check_client_batch(h: BatchHeader, tp: str) -> None:
    if h.base_offset != 0:
        raise InvalidRecordError(f"The baseOffset of the record batch in the append to {tp} "
                                 f"should be 0, but it is {h.base_offset}")
    if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{h.base_offset}, {h.last_offset}] and count of "
            f"records {h.records_count} in topic partition {tp}")
    if h.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in topic "
                                 f"partition {tp}")
    if h.has_producer_id and h.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {h.base_sequence} in record batch "
                                 f"with producerId {h.producer_id} in topic partition {tp}")


def _check_records(view: memoryview, pos: int, h: BatchHeader, config: LogConfig, now: int,
                   tp: str, record_validator: RecordValidator | None) -> None:
    """Kafka's record-level checks of a leader batch, run on the records only when the header
    cannot settle them."""
    check_timestamps = not _timestamps_proven(h, config, now)
    if not check_timestamps and (not config.compact or h.is_control):
        return
    if record_validator is not None:
        record_validator(view[pos : pos + h.size], h, config=config, now_ms=now,
                         topic_partition=tp, check_timestamps=check_timestamps)
    elif check_timestamps:
        _check_header_timestamps(h, config, now, tp)


def _timestamps_proven(h: BatchHeader, config: LogConfig, now: int) -> bool:
    """Whether the header shows every record passing Kafka's timestamp rule, trusting its max
    timestamp to be the records' maximum. Records lower than now - Long.MAX_VALUE, which only
    Java's overflow makes Kafka refuse, are not looked for."""
    lat_batch = h.attributes & TIMESTAMP_TYPE_BIT
    if config.message_timestamp_type == "LogAppendTime":
        return not lat_batch  # the broker stamps the batch, but a producer may not claim to
    if lat_batch:  # every record reads the max timestamp
        ts = h.max_timestamp
        return ts != NO_TIMESTAMP and \
            now - config.message_timestamp_before_max_ms <= ts <= \
            now + config.message_timestamp_after_max_ms
    # The base timestamp is the first record's, not the least: only an unbounded past proves
    # the lower bound.
    return config.message_timestamp_before_max_ms == LONG_MAX and \
        h.max_timestamp <= now + config.message_timestamp_after_max_ms


def _check_header_timestamps(h: BatchHeader, config: LogConfig, now: int, tp: str) -> None:
    """Without record checks: Kafka's rule on the timestamps the header shows (first and max)."""
    batch_lat = h.timestamp_type is TimestampType.LOG_APPEND_TIME
    # Records of a LogAppendTime batch all read the batch's max timestamp.
    stamps = (h.max_timestamp,) if batch_lat else (h.base_timestamp, h.max_timestamp)
    if config.timestamp_type is TimestampType.CREATE_TIME:
        low = now - config.message_timestamp_before_max_ms
        high = now + config.message_timestamp_after_max_ms
        for ts in stamps:
            if ts != NO_TIMESTAMP and not low <= ts <= high:
                raise InvalidTimestampError(
                    f"Timestamp {ts} of a record in the append to {tp} is out of range. The "
                    f"timestamp should be within [{low}, {high}]")
        if not batch_lat or h.max_timestamp != NO_TIMESTAMP:
            return
    if batch_lat:
        raise InvalidTimestampError(f"Invalid timestamp type in the append to {tp}: producers "
                                    f"must not set the timestamp type to LogAppendTime")


def _assign(view: memoryview, pos: int, h: BatchHeader, config: LogConfig, next_offset: int,
            leader_epoch: int, now: int) -> ValidatedAppend:
    """The leader's one batch (at `pos`, described by `h`) with its offsets from `next_offset`,
    its leader epoch, and under LogAppendTime the broker's timestamp and a new CRC."""
    header = bytearray(view[pos : pos + HEADER_SIZE])
    set_base_offset(header, 0, next_offset)
    set_partition_leader_epoch(header, 0, leader_epoch)
    body = view[pos + HEADER_SIZE : pos + h.size]
    if config.message_timestamp_type == "LogAppendTime":
        final = h._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch,
                           attributes=h.attributes | TIMESTAMP_TYPE_BIT, max_timestamp=now)
        HEADER.pack_into(header, 0, *final)
        final = final._replace(crc=crc32c(body, crc32c(header[CRC_START:])))
        HEADER.pack_into(header, 0, *final)
        log_append_time = now
    else:
        final = BatchHeader(next_offset, h[1], leader_epoch, *h[3:])
        log_append_time = NO_TIMESTAMP
    out = ValidatedAppend([header, body], log_append_time=log_append_time, size=h.size)
    _add(out, final)
    return out


def _assigned(view: memoryview, header: bytes, final: BatchHeader) -> ValidatedAppend:
    """The native check's one batch: `header` (offsets assigned) before the untouched records,
    as `_assign` makes it."""
    out = ValidatedAppend([header, view[HEADER_SIZE : final.size]], size=final.size)
    _add(out, final)
    return out


def _add(out: ValidatedAppend, h: BatchHeader) -> None:
    out.headers.append(h)
    out.record_count += h.records_count
    if h.max_timestamp > out.max_timestamp:
        out.max_timestamp, out.offset_of_max_timestamp = h.max_timestamp, h.last_offset
