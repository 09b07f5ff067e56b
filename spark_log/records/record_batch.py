"""A whole v2 RecordBatch: building one from records, decoding one, and walking many lazily.

`build_batch` writes the 61-byte header (see `batch_header`), the records section (`record`),
compressed with `compression`, and the CRC-32C. `decode_batch` reverses it. `iter_batches`
walks a buffer (bytes, or a memoryview of a file slice) yielding a `BatchView` per batch that
has parsed only the header; its records are decompressed and decoded only when asked for, so
skipping a batch costs one header parse and no copy.

Decoding follows Kafka's DefaultRecordBatch: a batch declaring 0 records has none, whatever its
records section holds; otherwise the section must hold exactly the declared count.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .batch_header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Compression,
    TimestampType,
    iter_headers,
    read_header,
    verify_crc,
    write_crc,
)
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from .crc import crc32c
from .errors import CorruptRecordError
from .record import NO_TIMESTAMP, Record, decode_records, encode_records, scan_keys

Buffer = bytes | bytearray | memoryview


# Long: one keyword per field of Kafka's MemoryRecordsBuilder and the header packed field by
# field; splitting it would only pass the same thirteen values around.
def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode `records` as one v2 batch.

    Record offsets are absolute: each record's offset delta is `offset - base_offset`, and they
    must increase (gaps are allowed, as compaction leaves them). Defaults follow Kafka's
    MemoryRecordsBuilder: the base timestamp is the first record's, the max timestamp the
    largest record timestamp (pass the append time for LOG_APPEND_TIME batches), the last offset
    delta that of the last record; compaction overrides it to keep the original batch's last
    offset. A batch without records (Kafka keeps such batches to retain producer state) gets
    NO_TIMESTAMP unless given, and no compression. Raises ValueError for values the format
    cannot hold.
    """
    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise ValueError("a transactional batch needs a producer id")
    records = tuple(records)
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    body = bytearray()
    summary = encode_records(records, body, base_offset, base_timestamp)
    if not records:
        compression = Compression.NONE
        summary = summary._replace(last_offset_delta=0, max_timestamp=base_timestamp)
    section = compress(compression, body, level=compression_level) if compression else body
    attributes = int(compression) | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
    attributes |= (TRANSACTIONAL_BIT if is_transactional else 0) | (
        CONTROL_BIT if is_control else 0
    )
    if last_offset_delta is None:
        last_offset_delta = summary.last_offset_delta
    elif last_offset_delta < summary.last_offset_delta:
        raise ValueError(f"last offset delta {last_offset_delta} precedes the last record")
    out = bytearray(HEADER_SIZE)
    try:
        HEADER.pack_into(
            out,
            0,
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(section),
            partition_leader_epoch,
            MAGIC,
            0,  # CRC, written below
            attributes,
            last_offset_delta,
            base_timestamp,
            summary.max_timestamp if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            summary.count,
        )
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from None
    out += section
    write_crc(out, 0, len(out))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A batch's header and its records, with absolute offsets and timestamps. Immutable."""

    header: BatchHeader
    records: tuple[Record, ...]


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> DecodedBatch:
    """Decode the batch at `pos` in `buf`; CorruptRecordError if it is not a valid v2 batch."""
    return BatchView(buf, pos).decode(
        verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
    )


def iter_batches(buf: Buffer, pos: int = 0, end: int | None = None) -> Iterator[BatchView]:
    """Yield a `BatchView` for each whole batch in buf[pos:end], parsing headers only.

    Raises CorruptRecordError at the first malformed or partial batch, as `iter_headers` does.
    """
    view = memoryview(buf)
    for batch_pos, header in iter_headers(view, pos, end):
        yield BatchView(view, batch_pos, header)


class BatchView:
    """One batch inside a larger buffer, read lazily.

    Holds a memoryview of the buffer (no copy) and the parsed header; records are decompressed
    and decoded only by `decode`, `records`, `keys` and `offsets_and_keys`, each call anew.
    Immutable after construction, so threads may share a view; the buffer must not change while
    it is in use, and the view keeps the buffer exported (release views before closing an mmap).
    """

    __slots__ = ("_view", "header", "position")

    def __init__(self, buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> None:
        self._view = memoryview(buf)
        self.position = pos
        self.header = read_header(self._view, pos) if header is None else header

    @property
    def size(self) -> int:
        return self.header.size

    @property
    def raw(self) -> memoryview:
        """The batch's bytes as they are stored, header included (a view, not a copy)."""
        return self._view[self.position : self.position + self.header.size]

    def verify_crc(self) -> None:
        header, pos = self.header, self.position
        # Inline: the cleaner checks every batch it reads. The helper raises with the details.
        if crc32c(self._view[pos + CRC_START : pos + header.size]) != header.crc:
            verify_crc(self._view, pos, header)

    def records_section(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> bytes:
        """The records section, decompressed (a copy)."""
        section = self.records_buffer(max_decompressed_size=max_decompressed_size)
        return section if isinstance(section, bytes) else bytes(section)

    def records_buffer(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> bytes | memoryview:
        """The records section: a view of the batch's own bytes if it is not compressed (no
        copy), else decompressed."""
        start = self.position + HEADER_SIZE
        section = self._view[start : self.position + self.header.size]
        codec = self.header.attributes & COMPRESSION_MASK
        if codec == Compression.NONE:
            return section
        if codec > Compression.ZSTD:
            raise CorruptRecordError(
                f"batch at byte {self.position}: unknown compression type id {codec}"
            )
        return decompress(Compression(codec), section, max_size=max_decompressed_size)

    def decode(
        self,
        *,
        verify_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> DecodedBatch:
        return DecodedBatch(
            self.header,
            self.records(verify_crc=verify_crc, max_decompressed_size=max_decompressed_size),
        )

    def records(
        self,
        *,
        verify_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> tuple[Record, ...]:
        """The records, with absolute offsets; under LOG_APPEND_TIME all take the batch's max
        timestamp, as Kafka's readers do."""
        header = self.header
        if verify_crc:
            self.verify_crc()
        if header.records_count == 0:
            return ()
        data = self.records_section(max_decompressed_size=max_decompressed_size)
        append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
        return decode_records(
            data,
            0,
            len(data),
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            append_time,
        )

    def offsets_and_keys(
        self,
        *,
        verify_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> Iterator[tuple[int, bytes | None]]:
        """Yield (offset, key) per record without decoding values or headers: what the
        compactor needs to map keys to their latest offsets."""
        header = self.header
        if verify_crc:
            self.verify_crc()
        if header.records_count == 0:
            return iter(())
        data = self.records_section(max_decompressed_size=max_decompressed_size)
        return iter(scan_keys(data, 0, len(data), header.records_count, header.base_offset))

    def keys(self, **options) -> Iterator[bytes | None]:
        """Yield each record's key (None for a null key); options as for `offsets_and_keys`."""
        return (key for _, key in self.offsets_and_keys(**options))

    def __repr__(self) -> str:
        h = self.header
        return (
            f"BatchView(position={self.position}, offsets={h.base_offset}..{h.last_offset}, "
            f"count={h.records_count}, attributes={h.attributes:#x})"
        )
