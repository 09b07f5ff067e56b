"""The shared index machinery, exercised through OffsetIndex (its simplest subclass)."""

from __future__ import annotations

import os

import pytest

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.offset_index import OffsetIndex

from ..conftest import CountingFileSystem


def test_nothing_is_opened_until_first_use(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 800, fs=fs)
    assert not index.is_loaded and fs.opened[".index"] == 0
    assert index.file_size == 0
    assert index.entries == 0
    assert index.is_loaded and fs.opened[".index"] == 1


def test_writable_index_is_preallocated_and_trimmed_on_close(tmp_path) -> None:  # type: ignore
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 803, writable=True)
    index.load()
    assert os.path.getsize(path) == 800  # rounded down to whole entries
    assert index.max_entries == 100
    index.append(5, 100)
    index.append(9, 300)
    index.close()
    assert os.path.getsize(path) == 16
    again = OffsetIndex(path, 0, 800)
    assert again.entries == 2 and again.last_entry() == (9, 300)


def test_set_writable_grows_and_trims(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 80)
    index.load()
    index.set_writable(True)
    assert os.path.getsize(path) == 80
    index.append(1, 10)
    index.set_writable(False)
    assert os.path.getsize(path) == 8 and index.entries == 1


def test_full_index_refuses_appends(tmp_path) -> None:  # type: ignore[no-untyped-def]
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 16, writable=True)
    index.append(1, 10)
    index.append(2, 20)
    assert index.is_full
    with pytest.raises(CorruptIndexError, match="full index"):
        index.append(3, 30)


def test_reset_drops_entries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 80, writable=True)
    index.append(1, 10)
    index.reset()
    assert index.entries == 0 and index.lookup(5) == (0, 0)


def test_check_size_without_opening(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "0.index"
    path.write_bytes(b"\0" * 12)
    index = OffsetIndex(str(path), 0, 80)
    assert "not a multiple of the entry size 8" in (index.check_size() or "")
    assert not index.is_loaded


def test_delete_and_rename(tmp_path) -> None:  # type: ignore[no-untyped-def]
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 80, writable=True)
    index.append(1, 10)
    index.close()
    index.rename(str(tmp_path / "0.index.deleted"))
    assert (tmp_path / "0.index.deleted").exists()
    index.delete_file()
    assert not (tmp_path / "0.index.deleted").exists()
    index.delete_file()  # already gone: fine


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_loaded_index_holds_at_most_one_descriptor(tmp_path) -> None:  # type: ignore
    # Many partitions must fit the descriptor limit: an active index holds none between
    # writes, a read-only one only its map's.
    before = _open_fds()
    active = OffsetIndex(str(tmp_path / "0.index"), 0, 800, writable=True)
    for i in range(10):
        active.append(i * 2, i * 100)
    assert _open_fds() == before and active.lookup(7).position == 300
    active.set_writable(False)
    assert _open_fds() == before + 1 and active.lookup(7).position == 300
    assert os.path.getsize(tmp_path / "0.index") == 80
    active.set_writable(True)
    active.append(40, 2000)
    assert _open_fds() == before and active.entries == 11 and active.lookup(41).offset == 40
    active.close()
    reopened = OffsetIndex(str(tmp_path / "0.index"), 0, 800)
    assert [e[0] for e in reopened.raw_entries()] == [*range(0, 20, 2), 40]
    reopened.close()
    assert _open_fds() == before
