"""The file-system calls storage makes that can fail in ways tests must reproduce.

Every open, positioned write, fsync, rename, remove and truncate of a log, index or checkpoint
file goes through a `FileSystem`, so a test can subclass it to fail an fsync with EIO (the one
fault that cannot be caused for real) or to count which files are opened. Index entries are
written here too (with pwrite, never through a map), though indexes are derived data, rebuilt
from the log.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview


class FileSystem:
    """Thin wrappers over `os`; stateless, so one instance may be shared by all logs."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | os.O_CLOEXEC, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:
        return os.pwritev(fd, buffers, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fsync_dir(self, path: str) -> None:
        """Make a create, rename or delete inside `path` durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def remove_tree(self, path: str) -> None:
        """Remove a partition directory (files only, no subdirectories) and make it durable."""
        for name in os.listdir(path):
            self.remove(os.path.join(path, name))
        os.rmdir(path)
        self.fsync_dir(os.path.dirname(path) or ".")

    def write_fully(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:
        """Write all of `buffers` (byte buffers) at `offset`, resuming after short writes;
        returns the bytes written.

        A regular file only writes short when the disk fills; the retry then fails with the
        real error (ENOSPC), which the caller turns into a storage failure.
        """
        total = sum(map(len, buffers))
        pending = buffers  # copied only after a short write (nearly every write is whole)
        written = 0
        while written < total:
            n = self.pwritev(fd, pending if len(pending) <= _IOV_MAX else pending[:_IOV_MAX],
                             offset + written)
            if n == 0:
                raise OSError(f"write of {total - written} bytes made no progress")
            written += n
            if written < total:
                pending = _skip(list(pending), n)
        return total


def _skip(buffers: list[Buffer], n: int) -> list[Buffer]:
    """`buffers` without their first `n` bytes."""
    while buffers and n >= len(buffers[0]):
        n -= len(buffers[0])
        buffers = buffers[1:]
    if buffers and n:
        buffers[0] = memoryview(buffers[0]).cast("B")[n:]
    return buffers


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024

DEFAULT_FS = FileSystem()
