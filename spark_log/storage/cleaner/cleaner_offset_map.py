"""The cleaner's map from each key of a log's dirty section to the offset of its latest record
(Kafka's OffsetMap; SkimpyOffsetMap is its fixed-memory implementation).

Kafka stores a 16-byte hash per key in a preallocated buffer. This map keeps the keys
themselves, so it is exact (no hash collisions): in a native table when the extension is built
(`records.record_scan.KeyOffsets`: one C walk per batch both parses the records and maps their
keys), else in a dict. Its memory is bounded by a budget in entries, estimated at `ENTRY_BYTES`
per key whichever table holds them, so both clean the same ranges. When the map is full the
cleaner cleans what it has mapped so far and the rest of the dirty section waits for the next
round, as in Kafka.
"""

from __future__ import annotations

import os

from spark_log.records.batch_rewrite import RecordSpan
from spark_log.records.batch_walk import FilterResult
from spark_log.records.record_batch import BatchView
from spark_log.records.record_scan import KeyOffsets, KeyOffsetTable, PyKeyOffsets

# A dict slot, a small bytes key and an int offset, as measured for keys of up to ~40 bytes
# (the native table needs less: two 32-byte slots and the key's bytes).
ENTRY_BYTES = 160
# Bytes of batches one walk call covers before the round yields: ~0.1 ms in C; the
# pure-Python walk takes ~1 µs a record, so it goes a batch at a time, as it always did.
NATIVE_WALK_BYTES = 256 * 1024


class OffsetMap:
    """key -> latest offset, plus the latest offset mapped so far.

    Invariants: every offset in the map is <= `latest_offset`; size <= capacity, except that a
    single batch is always mapped whole (so each round makes progress). Not thread-safe: one
    cleaning round owns it, in whichever thread runs the round.
    """

    def __init__(self, memory_bytes: int, load_factor: float = 0.9,
                 table: type[KeyOffsetTable] | None = None) -> None:
        self.capacity = max(1, int(memory_bytes * load_factor) // ENTRY_BYTES)
        # A random seed keeps producers from choosing keys that collide in the native table.
        table = table or KeyOffsets
        self._offsets = table(int.from_bytes(os.urandom(8), "little"))
        self.walk_bytes = 1 if table is PyKeyOffsets else NATIVE_WALK_BYTES
        self.latest_offset = -1
        # Offsets whose batches the map's walk checked the CRC of (see `checked_through`).
        self.checked: tuple[int, int] = (0, -1)

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
        self.checked = (0, -1)

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def has_room(self, records: int) -> bool:
        """Whether `records` more keys surely fit."""
        return len(self._offsets) + records <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        self._offsets.put(key, offset)
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put_batch(self, batch: BatchView, start: int) -> None:
        """Map each keyed record of `batch` at an offset >= `start` (later records win) after
        checking its CRC; CorruptRecordError if it does not check or parse."""
        header = batch.header
        batch.verify_crc()
        self._offsets.map_records(batch.records_buffer(), header.records_count,
                                  header.base_offset, start)
        self.update_latest_offset(header.last_offset)

    def map_batches(self, chunk: memoryview, pos: int, start: int) -> tuple[int, int, int]:
        """Map the batches of `chunk` from `pos` for one step of the walk under the default
        batch policy (`batch_walk.map_batches`, the capacity as its room); returns (where it
        stopped, records mapped, why it stopped)."""
        pos, latest, records, stop = self._offsets.map_batches(
            chunk, pos, pos + self.walk_bytes, start, self.capacity)
        self.update_latest_offset(latest)
        return pos, records, stop

    def checked_through(self, start: int) -> None:
        """Say that the walk from `start` to `latest_offset` checked the CRC of every batch
        with records that is not a control batch (the default policy's walk does)."""
        self.checked = (start, self.latest_offset)

    def filter_batches(self, chunk: memoryview, pos: int, now_ms: int, upper_bound: int
                       ) -> FilterResult:
        """One step of the rewrite's walk of `chunk` from `pos` under the default policy:
        `batch_walk.filter_batches`, against this map."""
        return self._offsets.filter_batches(chunk, pos, pos + self.walk_bytes,
                                            self.latest_offset, now_ms, upper_bound,
                                            *self.checked)

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 if it is not mapped."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def kept_records(self, section: bytes | memoryview, count: int, base_offset: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]:
        """The records of a batch's section that are past the map or the latest of their key
        (None when all are), and whether a tombstone is among them: see
        `KeyOffsetTable.kept_records`."""
        return self._offsets.kept_records(section, count, base_offset, self.latest_offset,
                                          keep_deletes)
