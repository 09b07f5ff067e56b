"""The fixed 61-byte header of a v2 RecordBatch: layout, parsing, CRC and in-place patching.

This is all that storage and the broker's produce/fetch paths need to handle batches as opaque
bytes: they read headers, check the CRC and patch the base offset and leader epoch, which lie
outside the CRC, without touching the records. Decoding the records is `record_batch`'s job.

Layout (big-endian), offsets from the start of the batch::

    0  baseOffset int64       8  batchLength int32     12 partitionLeaderEpoch int32
    16 magic int8             17 crc uint32 (CRC-32C of bytes 21..end)
    21 attributes int16       23 lastOffsetDelta int32 27 baseTimestamp int64
    35 maxTimestamp int64     43 producerId int64      51 producerEpoch int16
    53 baseSequence int32     57 recordsCount int32    61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

from .crc import crc32c
from .errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC = 2
CRC_START = 21  # the CRC covers attributes .. end of batch

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_POS = 12
_CRC = struct.Struct(">I")
_CRC_POS = 17
_MAGIC_POS = 16
_LENGTH = struct.Struct(">i")
_LENGTH_POS = 8

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class Compression(IntEnum):
    """The codec in attribute bits 0-2, numbered as Kafka numbers them."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3; Spark's `timestampType` column uses the same numbers."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40


class BatchHeader(NamedTuple):
    """A parsed batch header. `size` is the whole batch's length in bytes, header included."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_BIT) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from 2^31-1 to 0 as Kafka's do."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0, *,
                whole: bool = True) -> BatchHeader:
    """Parse and sanity-check the header at `pos`; the whole batch must lie inside `buf`
    (only the header when not `whole`: a read of the first bytes of a file range).

    Checks length, magic and bounds, not the CRC (see `verify_crc`), so scanning many batches
    to find one offset stays cheap.
    """
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at byte {pos}: {available} bytes left, a batch header needs {HEADER_SIZE}"
        )
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"batch at byte {pos}: magic {header.magic}, "
            "only record batch v2 (magic 2) is supported"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at byte {pos}: batch length {header.batch_length} too small"
        )
    if whole and header.size > available:
        raise CorruptRecordError(
            f"batch at byte {pos}: batch length {header.batch_length} runs past the end "
            f"({available} bytes left)"
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError(f"batch at byte {pos}: negative last offset delta or record count")
    return header


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Whole size of the batch starting at `pos` as its length field says, or None if fewer than
    12 bytes remain. Used to walk a file whose tail may be torn."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return LOG_OVERHEAD + _LENGTH.unpack_from(buf, pos + _LENGTH_POS)[0]


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of attributes..end for the batch of `size` bytes at `pos`."""
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at byte {pos} (base offset {header.base_offset}): CRC mismatch, "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def write_crc(buf: bytearray | memoryview, pos: int, size: int) -> None:
    """Recompute and store the CRC of a batch assembled in `buf`."""
    _CRC.pack_into(buf, pos + _CRC_POS, compute_crc(buf, pos, size))


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Patch the base offset in place; it lies outside the CRC, so the CRC stays valid."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Patch the leader epoch in place; it lies outside the CRC, so the CRC stays valid."""
    _LEADER_EPOCH.pack_into(buf, pos + _LEADER_EPOCH_POS, epoch)


def iter_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in buf[pos:end].

    Raises CorruptRecordError on the first malformed or partial batch; callers that tolerate a
    torn tail (recovery) catch it and truncate at the position it names.
    """
    view = memoryview(buf)
    if end is not None:
        view = view[:end]
    limit = len(view)
    while pos < limit:
        header = read_header(view, pos)
        yield pos, header
        pos += header.size
