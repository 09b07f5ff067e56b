from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_log.storage.filesystem import FileSystem


class ShortWrites(FileSystem):
    """Writes at most 3 bytes per call, as a file system may under pressure."""

    calls = 0

    def pwritev(self, fd, buffers, offset):  # type: ignore[no-untyped-def]
        self.calls += 1
        data = b"".join(bytes(b) for b in buffers)[:3]
        return os.pwrite(fd, data, offset)


def test_write_fully_resumes_after_short_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = ShortWrites()
    path = str(tmp_path / "f")
    fd = fs.open(path, os.O_RDWR | os.O_CREAT)
    try:
        assert fs.write_fully(fd, [b"hello ", memoryview(b"world"), bytearray(b"!")], 2) == 12
    finally:
        fs.close(fd)
    assert Path(path).read_bytes() == b"\0\0hello world!"
    assert fs.calls == 4


def test_write_fully_fails_when_no_progress(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Stuck(FileSystem):
        def pwritev(self, fd, buffers, offset):  # type: ignore[no-untyped-def]
            return 0

    fs = Stuck()
    fd = fs.open(str(tmp_path / "f"), os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="no progress"):
            fs.write_fully(fd, [b"abc"], 0)
    finally:
        fs.close(fd)


def test_remove_tree_and_fsync_dir(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = FileSystem()
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "a").write_bytes(b"1")
    (d / "b").write_bytes(b"2")
    fs.fsync_dir(str(d))
    fs.remove_tree(str(d))
    assert not d.exists()


def test_opened_fds_are_not_inherited(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = FileSystem()
    fd = fs.open(str(tmp_path / "f"), os.O_RDWR | os.O_CREAT)
    try:
        assert not os.get_inheritable(fd)
    finally:
        fs.close(fd)
