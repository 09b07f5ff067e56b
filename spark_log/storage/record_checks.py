"""Record-level hooks of storage, built on the record decoder: timestamp search inside a batch
and the null-key check of compacted topics (Kafka's LogValidator rule).

Both only decode what they must: the search decodes the one batch a lookup narrowed to; the
key check runs only for compacted topics and reads keys without values or headers.
"""

from __future__ import annotations

from spark_log.records.batch_header import BatchHeader
from spark_log.records.record_batch import BatchView, iter_batches

from .errors import InvalidRecordError
from .log_config import LogConfig


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


def reject_null_keys_on_compacted(batch: memoryview, header: BatchHeader, *, config: LogConfig,
                                  now_ms: int) -> None:
    """`RecordValidator`: a compacted topic needs a key on every record (control batches
    excepted), as Kafka answers with INVALID_RECORD."""
    if not config.compact or header.is_control:
        return
    for offset_delta, key in enumerate(_only(batch).keys(verify_crc=False)):
        if key is None:
            raise InvalidRecordError(
                f"Compacted topic cannot accept message without key in topic partition "
                f"(record {offset_delta} of the batch).")


RECORD_TIMESTAMP_SEARCH = RecordTimestampSearch()


def _only(batch: bytes | memoryview) -> BatchView:
    return next(iter_batches(batch))
