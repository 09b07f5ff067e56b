"""Decoded metadata records by their value bytes, while a node replays its metadata log at start.

A node's metadata log repeats itself. Each clean restart of a broker writes the same leadership
change for each partition it leads (to no leader at the shutdown, back to itself at the start,
as Kafka's controller writes them), so a log of many restarts holds far fewer distinct values
than records: 12 restarts of a node with 10,000 partitions, 320,166 records, 30,166 distinct.
Metadata records are immutable, so one decoded object stands for every copy of its bytes, and
decoding, a third of such a start, is done once per distinct value.
"""

from __future__ import annotations

from collections.abc import Callable

from spark_log.metadata import MetadataRecord, decode_record

__all__ = ["RecordMemo"]


class RecordMemo:
    """A decoder of record values that keeps what it decoded until `close()`.

    Invariants: an entry maps a value's exact bytes to the record `decode` made of them (a value
    that does not decode is never kept: it raises again, each time); at most `max_entries` are
    kept, and when full the memo starts over empty (a log of more distinct values than that
    decodes as without a memo, plus the keeping); after `close()` nothing is kept and every
    value is decoded. Not thread-safe.
    """

    def __init__(self, max_entries: int = 100_000,
                 decode: Callable[[bytes], MetadataRecord] = decode_record) -> None:
        if max_entries < 1:
            raise ValueError(f"a memo holds at least one record, not {max_entries}")
        self.max_entries = max_entries
        self._decode = decode
        self._kept: dict[bytes, MetadataRecord] | None = {}

    def __call__(self, value: bytes) -> MetadataRecord:
        kept = self._kept
        if kept is None:
            return self._decode(value)
        record = kept.get(value)
        if record is None:
            record = self._decode(value)
            if len(kept) >= self.max_entries:
                kept.clear()
            kept[bytes(value)] = record
        return record

    def __len__(self) -> int:
        return 0 if self._kept is None else len(self._kept)

    def close(self) -> None:
        """Keep nothing from now on (the start's replay is over: what is kept is only memory)."""
        self._kept = None
