"""The shared index machinery, exercised through OffsetIndex (its simplest subclass)."""

from __future__ import annotations

import os
import threading

import pytest

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.index.index_descriptors import IndexDescriptors
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
    # Many partitions must fit the descriptor limit: an active index holds only the descriptor
    # it writes through (while among the most recently written), a read-only one only its map's.
    before = _open_fds()
    active = OffsetIndex(str(tmp_path / "0.index"), 0, 800, writable=True,
                         descriptors=IndexDescriptors(4))  # the shared set may evict others'
    for i in range(10):
        active.append(i * 2, i * 100)
    assert _open_fds() == before + 1 and active.lookup(7).position == 300
    active.set_writable(False)
    assert _open_fds() == before + 1 and active.lookup(7).position == 300
    assert os.path.getsize(tmp_path / "0.index") == 80
    active.set_writable(True)
    active.append(40, 2000)
    assert _open_fds() == before + 1 and active.entries == 11 and active.lookup(41).offset == 40
    active.close()
    assert _open_fds() == before
    reopened = OffsetIndex(str(tmp_path / "0.index"), 0, 800)
    assert [e[0] for e in reopened.raw_entries()] == [*range(0, 20, 2), 40]
    reopened.close()
    assert _open_fds() == before


def _entries_in_file(path: str) -> list[tuple[int, int]]:
    """What another reader (`spark-log dump-log`) sees: the file, not the index object."""
    with open(path, "rb") as f:
        raw = f.read()
    return [OffsetIndex.ENTRY.unpack_from(raw, at) for at in range(0, len(raw) - 7, 8)
            if raw[at:at + 8] != bytes(8)]


def test_an_active_index_writes_each_entry_to_its_file_without_reopening_it(tmp_path) -> None:  # type: ignore
    fs = CountingFileSystem()
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, 800, writable=True, fs=fs, descriptors=IndexDescriptors(4))
    index.load()
    for i in range(1, 6):
        index.append(i, i * 100)
        assert _entries_in_file(path)[-1] == (i, i * 100)
    assert fs.opened[".index"] == 2  # the load's, then the one kept for writing


def test_the_least_recently_written_index_gives_up_its_descriptor(tmp_path) -> None:  # type: ignore
    descriptors = IndexDescriptors(2)
    fs = CountingFileSystem()
    paths = [str(tmp_path / f"{i}.index") for i in range(3)]
    indexes = [OffsetIndex(p, 0, 800, writable=True, fs=fs, descriptors=descriptors)
               for p in paths]
    before = _open_fds()
    for round_ in range(1, 4):
        for index in indexes:  # each write evicts the index written longest ago
            index.append(round_, round_ * 10)
    assert len(descriptors) == 2 and _open_fds() == before + 2
    assert not descriptors.holds(indexes[0]) and descriptors.holds(indexes[2])
    for path in paths:
        assert _entries_in_file(path) == [(1, 10), (2, 20), (3, 30)]
    for index in indexes:
        index.close()
    assert len(descriptors) == 0 and _open_fds() == before


@pytest.mark.parametrize("how", ["release", "delete_file", "reset", "set_writable"])
def test_an_index_let_go_of_closes_its_descriptor(tmp_path, how) -> None:  # type: ignore
    descriptors = IndexDescriptors(4)
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 800, writable=True,
                        descriptors=descriptors)
    index.append(1, 10)
    before = _open_fds()
    {"release": index.release, "delete_file": index.delete_file, "reset": index.reset,
     "set_writable": lambda: index.set_writable(False)}[how]()
    assert not descriptors.holds(index)
    assert _open_fds() == before - 1 + (how == "set_writable")  # (a rolled index is mapped)


def test_a_renamed_index_keeps_writing_to_its_file(tmp_path) -> None:  # type: ignore
    descriptors = IndexDescriptors(4)
    index = OffsetIndex(str(tmp_path / "0.index.cleaned"), 0, 800, writable=True,
                        descriptors=descriptors)
    index.append(1, 10)
    index.rename(str(tmp_path / "0.index.swap"))
    index.append(2, 20)
    assert descriptors.holds(index)
    assert _entries_in_file(str(tmp_path / "0.index.swap")) == [(1, 10), (2, 20)]


def test_indexes_written_from_two_threads_share_a_small_set_safely(tmp_path) -> None:  # type: ignore
    # The cleaner's worker writes its cleaned segment's indexes while the event loop appends:
    # an eviction by one thread must not close (or let another open reuse) the descriptor the
    # other is writing through.
    descriptors = IndexDescriptors(1)
    groups = [[OffsetIndex(str(tmp_path / f"{t}-{i}.index"), 0, 8000, writable=True,
                           descriptors=descriptors) for i in range(3)] for t in range(2)]

    def write(indexes: list[OffsetIndex]) -> None:
        for n in range(1, 301):
            for index in indexes:
                index.append(n, n)

    threads = [threading.Thread(target=write, args=(g,)) for g in groups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    for group in groups:
        for index in group:
            assert _entries_in_file(index.path) == [(n, n) for n in range(1, 301)]


def test_a_descriptor_set_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        IndexDescriptors(0)
