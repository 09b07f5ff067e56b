"""The cleaner's map from each key of a log's dirty section to the offset of its latest record
(Kafka's OffsetMap; SkimpyOffsetMap is its fixed-memory implementation).

Kafka stores a 16-byte hash per key in a preallocated buffer. A Python dict of the keys
themselves is faster to fill here (no hashing in Python, the key bytes already exist) and
exact (no hash collisions); its memory is bounded instead by a budget in entries, estimated at
`ENTRY_BYTES` per key. When the map is full the cleaner cleans what it has mapped so far and the
rest of the dirty section waits for the next round, as in Kafka.
"""

from __future__ import annotations

from spark_log.records.batch_rewrite import map_latest_offsets
from spark_log.records.record_batch import BatchView

# A dict slot, a small bytes key and an int offset, as measured for keys of up to ~40 bytes.
ENTRY_BYTES = 160


class OffsetMap:
    """key -> latest offset, plus the latest offset mapped so far.

    Invariants: every offset in the map is <= `latest_offset`; size <= capacity, except that a
    single batch is always mapped whole (so each round makes progress). Not thread-safe: one
    cleaning round owns it, in whichever thread runs the round.
    """

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.capacity = max(1, int(memory_bytes * load_factor) // ENTRY_BYTES)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._offsets = {}
        self.latest_offset = -1

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
        self._offsets[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put_batch(self, batch: BatchView, start: int) -> None:
        """Map each keyed record of `batch` at an offset >= `start` (later records win) after
        checking its CRC; CorruptRecordError if it does not check or parse."""
        header = batch.header
        batch.verify_crc()
        section = batch.records_section()
        map_latest_offsets(section, header.records_count, header.base_offset, self._offsets,
                           start)
        self.update_latest_offset(header.last_offset)

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 if it is not mapped."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    @property
    def lookup(self):  # type: ignore[no-untyped-def]
        """The bound `dict.get` for hot loops: lookup(key, -1)."""
        return self._offsets.get
