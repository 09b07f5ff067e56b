from __future__ import annotations

import struct
from pathlib import Path

import pytest

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.offset_index import OffsetIndex, OffsetPosition


@pytest.fixture
def index(tmp_path) -> OffsetIndex:  # type: ignore[no-untyped-def]
    idx = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, 8 * 64, writable=True)
    for i in range(1, 11):
        idx.append(100 + 10 * i, 1000 * i)
    return idx


def test_file_format_is_relative_offset_then_position(index: OffsetIndex) -> None:
    index.close()
    raw = Path(index.path).read_bytes()
    assert len(raw) == 80
    assert struct.unpack_from(">ii", raw, 0) == (10, 1000)
    assert struct.unpack_from(">ii", raw, 72) == (100, 10000)


def test_lookup_is_largest_entry_at_or_below(index: OffsetIndex) -> None:
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(100) == OffsetPosition(100, 0)
    assert index.lookup(109) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 1000)
    assert index.lookup(155) == OffsetPosition(150, 5000)
    assert index.lookup(10**9) == OffsetPosition(200, 10000)


def test_appends_must_increase_and_fit(index: OffsetIndex) -> None:
    with pytest.raises(CorruptIndexError, match="after offset 200"):
        index.append(200, 11000)
    assert index.can_append_offset(100 + 2**31 - 1)
    assert not index.can_append_offset(100 + 2**31)
    assert not index.can_append_offset(99)


def test_truncate_to_removes_entries_at_or_after(index: OffsetIndex) -> None:
    index.truncate_to(150)
    assert index.entries == 4 and index.last_offset == 140
    index.truncate_to(141)
    assert index.entries == 4
    index.truncate_to(0)
    assert index.entries == 0 and index.last_entry() == OffsetPosition(100, 0)


def test_sanity_check(index: OffsetIndex) -> None:
    index.sanity_check(log_size=10001)
    with pytest.raises(CorruptIndexError, match="past the log"):
        index.sanity_check(log_size=10000)
    index.close()
    with open(index.path, "r+b") as f:  # swap two entries
        f.seek(8)
        f.write(struct.pack(">ii", 5, 500))
    reopened = OffsetIndex(index.path, 100, 8 * 64)
    with pytest.raises(CorruptIndexError, match="do not strictly increase"):
        reopened.sanity_check(log_size=10001)
