"""Finding a record by timestamp inside one batch: the hook between storage and the records.

Storage narrows a timestamp lookup to a batch from headers alone (time index, then each batch's
max timestamp). Which record inside the batch answers needs the records; `RecordSearch` is that
step. `HEADER_ONLY` answers from the header: exact for LogAppendTime batches (every record has
the batch's timestamp) and single-record batches, and for other batches it answers the batch's
first eligible offset with the batch's max timestamp (never skipping a matching record). The
broker plugs in a record-level search built on `spark_log.records.record_batch`.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from spark_log.records.batch_header import BatchHeader


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the record's timestamp, offset and leader epoch (None if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class RecordSearch(Protocol):
    def first_at_or_after(self, batch: bytes, header: BatchHeader, target_timestamp: int,
                          min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target and offset >=
        min_offset, or None."""
        ...

    def offset_of_max_timestamp(self, batch: bytes, header: BatchHeader) -> int:
        """Offset of the first record carrying the batch's max timestamp."""
        ...


class HeaderOnlySearch:
    """The batch-level answer described in the module docstring. Stateless."""

    def first_at_or_after(self, batch: bytes, header: BatchHeader, target_timestamp: int,
                          min_offset: int) -> tuple[int, int] | None:
        if header.max_timestamp < target_timestamp or header.last_offset < min_offset:
            return None
        return max(header.base_offset, min_offset), header.max_timestamp

    def offset_of_max_timestamp(self, batch: bytes, header: BatchHeader) -> int:
        # Exact for LogAppendTime and one-record batches; otherwise the batch's first offset,
        # so a consumer seeking there still reads the record with the max timestamp.
        return header.base_offset


HEADER_ONLY = HeaderOnlySearch()
