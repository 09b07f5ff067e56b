"""Reads that start where an earlier read of the segment ended: a consumer keeping up with a
log asks, fetch after fetch, for the offset right after what it was last sent.

Kafka finds a fetch's first batch through the offset index and a header walk of up to
index.interval.bytes, then walks again to the byte limit. For the next fetch of a consumer
that position is already known: `ReadPositions` remembers where recent reads ended, and
`read_from` answers a small read from there with one `pread` of its bytes and a walk over
them — no index look-up and no map of the file. Larger reads take the indexed path.
"""

from __future__ import annotations

from spark_log.records.batch_header import HEADER_SIZE, read_header
from spark_log.storage.log.file_records import FileRecords

SMALL_READ_BYTES = 64 * 1024  # above this a read walks a map of the file instead of a copy
# Read at least this much: as cheap as reading one header, and it holds the whole first batch
# a fetch of a few bytes per partition gets anyway (min_one_batch), so that is not read again.
MIN_READ_BYTES = 4096
REMEMBERED = 64  # positions kept per segment: one per consumer keeping up, and some


class ReadPositions:
    """Offsets mapped to the byte position of the first batch whose last offset is at or
    after them, learnt from the ends of reads.

    Invariants: every entry holds for the file as it is (the owner clears them when the file
    is truncated); at most REMEMBERED entries, the oldest dropped first.
    """

    __slots__ = ("_at",)

    def __init__(self) -> None:
        self._at: dict[int, int] = {}

    def get(self, offset: int) -> int | None:
        return self._at.get(offset)

    def remember(self, offset: int, position: int) -> None:
        at = self._at
        if offset not in at and len(at) >= REMEMBERED:
            del at[next(iter(at))]
        at[offset] = position

    def clear(self) -> None:
        self._at.clear()


def read_from(log: FileRecords, position: int, offset: int, max_bytes: int,
              max_offset: int | None, min_one_batch: bool
              ) -> tuple[int, int, int, memoryview | None] | None:
    """(start, end, offset after the last batch, the bytes read when they hold the whole
    range) of a read of whole batches from `position`, where the first batch with a last
    offset at or after `offset` starts: at most `max_bytes` (the first batch whole when
    `min_one_batch`), none starting at or after `max_offset`.
    None when the read would span more than SMALL_READ_BYTES, reaches nothing, or the bytes
    there are not what the position promised — the caller then takes the indexed path, which
    also reports damage."""
    want = min(log.size - position, max(max_bytes, MIN_READ_BYTES))
    if want < HEADER_SIZE or want > SMALL_READ_BYTES:
        return None
    buf = memoryview(log.read(position, want))
    try:
        first = read_header(buf, 0, whole=False)
    except ValueError:
        return None
    if first.last_offset < offset or (max_offset is not None and first.base_offset >= max_offset):
        return None
    limit = max(max_bytes, first.size) if min_one_batch else max_bytes
    if first.size > len(buf):  # only a first batch read whole by min_one_batch is this large
        if min_one_batch and position + first.size <= log.size:
            return position, position + first.size, first.next_offset, None
        return None
    end, next_offset, header = 0, None, first
    while True:
        if (max_offset is not None and header.base_offset >= max_offset) or \
                end + header.size > min(limit, len(buf)):
            break
        end += header.size
        next_offset = header.next_offset
        if end + HEADER_SIZE > len(buf):
            break
        try:
            header = read_header(buf, end, whole=False)
        except ValueError:
            return None
    if next_offset is None:
        return None
    return position, position + end, next_offset, buf[:end]
