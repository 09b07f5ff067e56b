from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset


@pytest.fixture
def index(tmp_path) -> TimeIndex:  # type: ignore[no-untyped-def]
    return TimeIndex(str(tmp_path / "00000000000000000050.timeindex"), 50, 12 * 5,
                     writable=True)


def test_appends_only_larger_timestamps(index: TimeIndex) -> None:
    index.maybe_append(NO_TIMESTAMP, 50)  # no timestamp: nothing to index
    index.maybe_append(1000, 55)
    index.maybe_append(1000, 56)  # not larger: skipped
    index.maybe_append(2000, 60)
    assert index.entries == 2
    assert index.last_entry() == TimestampOffset(2000, 60)
    with pytest.raises(CorruptIndexError, match="after offset 60"):
        index.maybe_append(3000, 59)


def test_file_format_is_timestamp_then_relative_offset(index: TimeIndex) -> None:
    index.maybe_append(1234, 57)
    index.close()
    raw = Path(index.path).read_bytes()
    assert raw == struct.pack(">qi", 1234, 7)


def test_lookup(index: TimeIndex) -> None:
    for ts, off in [(100, 51), (200, 60), (300, 70)]:
        index.maybe_append(ts, off)
    assert index.lookup(99) == TimestampOffset(NO_TIMESTAMP, 50)
    assert index.lookup(100) == TimestampOffset(100, 51)
    assert index.lookup(250) == TimestampOffset(200, 60)
    assert index.lookup(10**12) == TimestampOffset(300, 70)


def test_last_slot_is_reserved_for_the_roll_entry(index: TimeIndex) -> None:
    for i in range(4):
        index.maybe_append(100 + i, 50 + i)
    assert index.is_full
    with pytest.raises(CorruptIndexError, match="full time index"):
        index.maybe_append(200, 60)
    index.maybe_append(200, 60, skip_full_check=True)
    assert index.entries == 5


def test_roll_entry_fits_a_trimmed_index(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "0.timeindex")
    idx = TimeIndex(path, 0, 120, writable=True)
    idx.maybe_append(10, 1)
    idx.close()
    trimmed = TimeIndex(path, 0, 120)
    trimmed.maybe_append(20, 2, skip_full_check=True)
    assert trimmed.entries == 2 and os.path.getsize(path) == 24


def test_truncate_to(index: TimeIndex) -> None:
    for ts, off in [(100, 51), (200, 60), (300, 70)]:
        index.maybe_append(ts, off)
    index.truncate_to(61)
    assert index.last_entry() == TimestampOffset(200, 60)
    index.truncate_to(60)
    assert index.last_entry() == TimestampOffset(100, 51)


def test_sanity_check_finds_decreasing_entries(tmp_path) -> None:  # type: ignore
    path = tmp_path / "0.timeindex"
    path.write_bytes(struct.pack(">qi", 200, 1) + struct.pack(">qi", 100, 2))
    with pytest.raises(CorruptIndexError, match="do not increase"):
        TimeIndex(str(path), 0, 120).sanity_check()
    path.write_bytes(b"\0" * 13)
    with pytest.raises(CorruptIndexError, match="multiple"):
        TimeIndex(str(path), 0, 120).sanity_check()
