"""The log cleaner's per-record walks of a v2 records section, native when built: `KeyOffsets`
(record key -> latest offset, filled and queried a section at a time: the offset map and the
record filter), and its walks over a chunk of whole batches (`batch_walk`).

`spark_log.records._native_scan` implements it in C (setup.py builds it when a compiler is
there); the pure-Python class here defines the behaviour and stands in when it is not built.
`NATIVE` says which one `KeyOffsets` is; the tests run both.
Pure functions and in-memory tables, no I/O.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

from . import batch_walk
from .batch_rewrite import RecordSpan, map_latest_offsets, scan_record_spans

Section = bytes | bytearray | memoryview


class KeyOffsetTable(Protocol):
    """What both implementations offer."""

    def __len__(self) -> int: ...

    def clear(self) -> None: ...

    def get(self, key: bytes, missing: int = -1) -> int: ...

    def put(self, key: bytes, offset: int) -> None: ...

    def map_records(self, section: Section, count: int, base_offset: int,
                    start_offset: int) -> None: ...

    def kept_records(self, section: Section, count: int, base_offset: int, latest: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]: ...

    def map_batches(self, chunk: Section, pos: int, limit: int, start_offset: int,
                    room: int) -> batch_walk.MapResult: ...

    def filter_batches(self, chunk: Section, pos: int, limit: int, latest: int, now_ms: int,
                       upper_bound: int, checked_from: int, checked_to: int
                       ) -> batch_walk.FilterResult: ...


class PyKeyOffsets:
    """Record key -> latest offset mapped for it, exact (a dict of the key bytes).

    Invariant: holds exactly the keys put or mapped since it was made or cleared. Not
    thread-safe: one owner at a time. `seed` is accepted for the native table's sake.
    """

    def __init__(self, seed: int = 0) -> None:
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def clear(self) -> None:
        self._latest = {}

    def get(self, key: bytes, missing: int = -1) -> int:
        return self._latest.get(bytes(key), missing)

    def put(self, key: bytes, offset: int) -> None:
        self._latest[bytes(key)] = offset

    def map_records(self, section: Section, count: int, base_offset: int,
                    start_offset: int) -> None:
        """Map each keyed record of `section` at or after `start_offset` to its offset, in
        order (later records win); CorruptRecordError if the section does not parse."""
        map_latest_offsets(bytes(section), count, base_offset, self._latest, start_offset)

    def kept_records(self, section: Section, count: int, base_offset: int, latest: int,
                     keep_deletes: bool) -> tuple[list[RecordSpan] | None, bool]:
        """(None if every record is kept, else the spans of those kept; whether a kept one is
        a tombstone). A record is kept when its offset is past `latest`, or it has a key whose
        mapped offset is not past its own (or is unmapped) and it has a value or
        `keep_deletes`."""
        spans = scan_record_spans(bytes(section), count, base_offset)
        lookup = self._latest.get
        kept = []
        tombstones = False
        for span in spans:
            offset, key, has_value = span[0], span[1], span[2]
            if offset > latest or (key is not None and (has_value or keep_deletes)
                                   and offset >= lookup(key, -1)):
                kept.append(span)
                tombstones = tombstones or not has_value
        return (None if len(kept) == len(spans) else kept), tombstones

    def map_batches(self, chunk: Section, pos: int, limit: int, start_offset: int,
                    room: int) -> batch_walk.MapResult:
        """See `batch_walk.map_batches`."""
        return batch_walk.map_batches(self, chunk, pos, limit, start_offset, room)

    def filter_batches(self, chunk: Section, pos: int, limit: int, latest: int, now_ms: int,
                       upper_bound: int, checked_from: int, checked_to: int
                       ) -> batch_walk.FilterResult:
        """See `batch_walk.filter_batches`."""
        return batch_walk.filter_batches(self, chunk, pos, limit, latest, now_ms, upper_bound,
                                         checked_from, checked_to)


try:  # by name: import-linter reads only Python sources and would misplace the compiled module
    _native = importlib.import_module(f"{__package__}._native_scan")
except ImportError:  # not built: no compiler where it was installed
    NativeKeyOffsets: type[KeyOffsetTable] | None = None
    native_whole_batches: Callable[[Section], int] | None = None
else:
    NativeKeyOffsets = _native.KeyOffsets
    native_whole_batches = _native.whole_batches

NATIVE = NativeKeyOffsets is not None
KeyOffsets: type[KeyOffsetTable] = NativeKeyOffsets or PyKeyOffsets
whole_batches: Callable[[Section], int] = native_whole_batches or batch_walk.whole_batches
