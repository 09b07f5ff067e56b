"""The log cleaner's walks over a chunk of whole v2 batches, in pure Python: `whole_batches` (how
much of a read is whole batches), `map_batches` (the offset map's walk) and `filter_batches`
(the rewrite's), for the default batch policy.

They define what the native `whole_batches` and `KeyOffsets.map_batches` / `filter_batches`
of `_native_batches.c` do in one call per chunk, and stand in for them (through
`record_scan.PyKeyOffsets`) when the extension is not built; the tests hold both to the same
results and errors. Each takes the key table that maps or is asked about the records. Pure
functions of the chunk and the table, no I/O.
"""

from __future__ import annotations

from typing import Protocol

from .batch_header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    BatchHeader,
    peek_size,
    read_header,
    verify_crc,
)
from .batch_rewrite import RecordSpan
from .errors import CorruptRecordError

Chunk = bytes | bytearray | memoryview

# Why `map_batches` stopped, as _native_batches.c numbers them.
WALK_END = 0  # at `limit` or the end of the chunk
WALK_FULL = 1  # before a batch whose records might not fit the map
WALK_CALLER = 2  # before a batch it leaves to the caller (compressed, or an offset overflow)

# What to do with a batch, in `filter_batches`' decisions.
KEEP = 0  # copy it as it is
BY_CALLER = 1  # let the cleaner's RecordFilter decide (and check its CRC)

INT64_MAX = 2**63 - 1
MapResult = tuple[int, int, int, int]
FilterResult = tuple[int, list[tuple[int, int]], tuple[int, int, int, int]]


class RecordTable(Protocol):
    def __len__(self) -> int: ...

    def map_records(self, section: Chunk, count: int, base_offset: int,
                    start_offset: int) -> None: ...

    def kept_records(self, section: Chunk, count: int, base_offset: int, latest: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]: ...


def whole_batches(buf: Chunk) -> int:
    """Length of the prefix of `buf` made of whole batches (by their length fields)."""
    pos = 0
    while True:
        size = peek_size(buf, pos)
        if size is None or size < HEADER_SIZE or pos + size > len(buf):
            return pos
        pos += size


def map_batches(table: RecordTable, chunk: Chunk, pos: int, limit: int, start_offset: int,
                room: int) -> MapResult:
    """Map the keyed records of the batches from `pos` (until `limit` or the chunk's end) at
    offsets >= `start_offset`, each batch's CRC checked first. Batches ending before
    `start_offset` are skipped, control and empty ones only counted in `latest`. Stops before
    a batch when the table holds keys and `room` keys cannot take its records (WALK_FULL), or
    it is compressed (WALK_CALLER). Returns (position reached, the last offset of the batches
    walked past or -1, records mapped, why it stopped)."""
    view = memoryview(chunk)
    latest, mapped = -1, 0
    while 0 <= pos < len(view) and pos < limit:
        header = read_header(view, pos)
        if header.last_offset >= start_offset:
            if header.attributes & COMPRESSION_MASK or header.last_offset > INT64_MAX:
                return pos, latest, mapped, WALK_CALLER
            count = header.records_count
            if not header.attributes & CONTROL_BIT and count:
                if len(table) and len(table) + count > room:
                    return pos, latest, mapped, WALK_FULL
                verify_crc(view, pos, header)
                table.map_records(view[pos + HEADER_SIZE:pos + header.size], count,
                                  header.base_offset, start_offset)
                mapped += count
            latest = max(latest, header.last_offset)
        pos += header.size
    return pos, latest, mapped, WALK_END


def filter_batches(table: RecordTable, chunk: Chunk, pos: int, limit: int, latest: int,
                   now_ms: int, upper_bound: int, checked_from: int, checked_to: int
                   ) -> FilterResult:
    """Decide, for the batches from `pos` (until `limit`, the chunk's end, or the first batch
    left to the caller), what the cleaner's RecordFilter would under the default policy,
    against the table's mapped offsets up to `latest`: copy a batch whose records are all
    kept (KEEP) and drop one without a producer id that keeps none; leave the rest to the
    caller (BY_CALLER): compressed, control, empty batches, the one ending at `upper_bound`,
    and those to rebuild or keep empty. A batch copied or dropped has its CRC checked unless
    its last offset is in [checked_from, checked_to] (checked by this round's offset map).
    Returns (position reached, the (position, KEEP or BY_CALLER) of the batches listed, the
    (messages read, bytes read, messages retained, bytes retained) of those copied or
    dropped)."""
    view = memoryview(chunk)
    decisions: list[tuple[int, int]] = []
    counts = [0, 0, 0, 0]
    outcome = KEEP
    while 0 <= pos < len(view) and pos < limit and outcome != BY_CALLER:
        header = read_header(view, pos)
        outcome = _decide(table, view, pos, header, latest, now_ms, upper_bound)
        if outcome != BY_CALLER:
            if not checked_from <= header.last_offset <= checked_to:
                verify_crc(view, pos, header)
            counts[0] += header.records_count
            counts[1] += header.size
        if outcome == KEEP:
            counts[2] += header.records_count
            counts[3] += header.size
        if outcome is not None:
            decisions.append((pos, outcome))
        pos += header.size
    return pos, decisions, (counts[0], counts[1], counts[2], counts[3])


def _decide(table: RecordTable, view: memoryview, pos: int, header: BatchHeader, latest: int,
            now_ms: int, upper_bound: int) -> int | None:
    """KEEP, BY_CALLER, or None (drop) for one batch."""
    attributes = header.attributes
    if attributes & (COMPRESSION_MASK | CONTROL_BIT) or not header.records_count \
            or header.next_offset == upper_bound or header.last_offset > INT64_MAX:
        return BY_CALLER
    keep_deletes = not header.has_delete_horizon or now_ms < header.base_timestamp
    try:
        kept, tombstones = table.kept_records(view[pos + HEADER_SIZE:pos + header.size],
                                              header.records_count, header.base_offset,
                                              latest, keep_deletes)
    except CorruptRecordError:  # RecordFilter checks the CRC first: a bad one says so
        verify_crc(view, pos, header)
        raise
    if kept is not None and not kept:
        return BY_CALLER if header.producer_id >= 0 else None
    if kept is None and not (tombstones and not header.has_delete_horizon):
        return KEEP
    return BY_CALLER
