from __future__ import annotations

import mmap
import os
import socket
from pathlib import Path

import pytest

from spark_log.records.errors import CorruptRecordError
from spark_log.storage.log.file_records import EMPTY_SLICE, SMALL_FILE_BYTES, FileRecords

from ..batches import make_batch


@pytest.fixture
def records(tmp_path) -> FileRecords:  # type: ignore[no-untyped-def]
    f = FileRecords(str(tmp_path / "00000000000000000000.log"))
    f.append([make_batch(2, base_offset=0)])
    f.append([make_batch(3, base_offset=2)[:61], make_batch(3, base_offset=2)[61:]])
    return f


def test_append_writes_at_the_end_and_batches_walks_headers(records: FileRecords) -> None:
    assert records.size == os.path.getsize(records.path)
    walked = [(pos, h.base_offset, h.records_count) for pos, h in records.batches()]
    first_size = len(make_batch(2))
    assert walked == [(0, 0, 2), (first_size, 2, 3)]
    assert [h.base_offset for _, h in records.batches(first_size)] == [2]
    assert list(records.batches(records.size)) == []


def test_slice_reads_bytes_and_sends_with_sendfile(records: FileRecords) -> None:
    s = records.slice(0, records.size)
    assert s.read_bytes() == Path(records.path).read_bytes()
    a, b = socket.socketpair()
    with a, b:
        assert s.send_to(a.fileno()) == records.size
        got = b""
        while len(got) < records.size:
            got += b.recv(65536)
    assert got == s.read_bytes()
    assert records.slice(5, 0) is EMPTY_SLICE and EMPTY_SLICE.read_bytes() == b""


def test_slice_stays_readable_after_close_and_delete(records: FileRecords) -> None:
    s = records.slice(0, records.size)
    expected = s.read_bytes()
    records.delete()
    assert not os.path.exists(records.path)
    assert s.read_bytes() == expected  # the open fd keeps the unlinked data


def test_fd_is_closed_once_the_last_holder_lets_go(records: FileRecords) -> None:
    s = records.slice(0, records.size)
    fd = s.fileno()
    records.close()
    os.fstat(fd)  # still open: the slice holds it
    del s
    with pytest.raises(OSError):
        os.fstat(fd)


def test_truncate_and_torn_tail(records: FileRecords) -> None:
    end = records.size
    with open(records.path, "ab") as f:
        f.write(b"\x00\x00\x00")
    tail = FileRecords(records.path)
    assert tail.size == end + 3
    with pytest.raises(CorruptRecordError):
        list(tail.batches())
    assert tail.truncate_to(end) == 3
    assert os.path.getsize(records.path) == end
    with pytest.raises(ValueError):
        tail.truncate_to(end + 1)


def test_preallocated_file_is_trimmed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = FileRecords(str(tmp_path / "p.log"), init_file_size=1 << 16)
    assert os.path.getsize(f.path) == 1 << 16 and f.size == 0
    f.append([make_batch(1)])
    f.trim()
    assert os.path.getsize(f.path) == f.size == len(make_batch(1))


def test_map_reads_a_small_file_whole_and_maps_a_large_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    small = FileRecords(str(tmp_path / "00000000000000000000.log"))
    assert small.map() is None  # empty
    small.append([make_batch(2, base_offset=0)])
    assert type(small.map()) is bytes and small.map() == Path(small.path).read_bytes()
    large = FileRecords(str(tmp_path / "00000000000000000100.log"))
    offset = 100
    while large.size <= SMALL_FILE_BYTES:
        large.append([make_batch(50, base_offset=offset)])
        offset += 50
    mapped = large.map()
    assert isinstance(mapped, mmap.mmap) and mapped[:] == Path(large.path).read_bytes()
    assert [h.base_offset for _, h in large.batches()] == list(range(100, offset, 50))
