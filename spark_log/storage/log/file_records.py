"""The .log file of a segment (Kafka's FileRecords) and the slices fetches read from it.

Appends are positioned writes of whole batches at the end; reads hand out a `FetchSlice` (fd,
position, size) that the broker can `os.sendfile` to a socket without copying into Python.
Batch headers are walked through a read-only mmap of the file, so scanning a segment costs no
system call per batch.

The fd lives in a `FileHandle` shared by the file and every slice cut from it; it is closed
when the last of them lets go. A slice therefore stays readable after its segment is rolled,
closed, or deleted by retention: on POSIX an open fd keeps an unlinked file's data alive. Only
`truncate_to` (replication, recovery) can shorten what a slice sees.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from spark_log.records.batch_header import BatchHeader, iter_headers
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.filesystem import DEFAULT_FS, Buffer, FileSystem


class FileHandle:
    """An open fd; closed when the last FileRecords or FetchSlice holding it is collected."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass(slots=True)  # not frozen: that costs a setattr call per field, on every fetch
class FetchSlice:
    """`size` bytes of whole batches at `position` of an open log file (empty: size 0).

    Cheap to create and pass around; holds the file open until it is dropped. `data`, when the
    read that cut the slice already copied its bytes (a small read), is those bytes, so they
    are not read again to be sent. Never modified once cut.
    """

    handle: FileHandle | None
    position: int
    size: int
    # the offset after the last batch, when the read saw it; for a slice taking the rest of a
    # segment, the segment's end offset (the next segment's base offset, or the log end)
    next_offset: int | None = None
    data: bytes | memoryview | None = None

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        if self.handle is None:
            raise ValueError("an empty slice has no file")
        return self.handle.fd

    def read_bytes(self) -> bytes:
        """The slice's bytes (shorter only if the log was truncated since the slice was cut)."""
        if self.handle is None or self.size == 0:
            return b""
        if self.data is not None:
            return bytes(self.data)
        chunks, done = [], 0
        while done < self.size:
            chunk = os.pread(self.handle.fd, self.size - done, self.position + done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)

    def send_to(self, out_fd: int) -> int:
        """Copy the slice to a blocking fd (socket, pipe, file) with os.sendfile; bytes sent."""
        sent = 0
        while sent < self.size:
            n = os.sendfile(out_fd, self.fileno(), self.position + sent, self.size - sent)
            if n == 0:
                break
            sent += n
        return sent


EMPTY_SLICE = FetchSlice(None, 0, 0)
SMALL_FILE_BYTES = 64 * 1024  # read whole rather than mapped (`FileRecords.map`)


def slice_next_offset(records: FetchSlice) -> int | None:
    """The offset after the last batch of a slice — what bounds the aborted transactions a
    fetch must list: as the read that cut it saw it (the segment's end offset for a slice
    taking the rest of a segment, as Kafka bounds it), else by walking its headers through a
    map of just that range. None if the slice is empty or no longer readable whole (the file was
    truncated since it was cut)."""
    if records.handle is None or records.size == 0:
        return None
    if records.next_offset is not None:  # the read that cut the slice saw its last batch
        return records.next_offset
    start = records.position - records.position % mmap.ALLOCATIONGRANULARITY
    last = None
    try:
        mm = mmap.mmap(records.handle.fd, records.position + records.size - start,
                       prot=mmap.PROT_READ, offset=start)
        for _, header in iter_headers(mm, records.position - start):
            last = header
        del mm  # unmapped once the header walk has let go of it
    except (ValueError, OSError, CorruptRecordError):
        return None
    return last.next_offset if last is not None else None


class FileRecords:
    """A log file of concatenated batches; `size` bytes of it are valid.

    Invariants: bytes [0, size) are whole batches written by `append` (or found valid by
    recovery); the file may be longer only while preallocated. Not thread-safe.
    """

    def __init__(self, path: str, *, fs: FileSystem = DEFAULT_FS, init_file_size: int = 0) -> None:
        self.path = path
        self.fs = fs
        fd = fs.open(path, os.O_RDWR | os.O_CREAT)
        self._handle: FileHandle | None = FileHandle(fd)
        self.size = os.fstat(fd).st_size
        if not self.size and init_file_size:  # new (or empty): preallocate
            os.posix_fallocate(fd, 0, init_file_size)

    @property
    def fd(self) -> int:
        if self._handle is None:
            raise ValueError(f"{self.path} is closed")
        return self._handle.fd

    def append(self, buffers: Sequence[Buffer]) -> int:
        """Write `buffers` at the end; returns the position they start at."""
        position = self.size
        self.size += self.fs.write_fully(self.fd, buffers, position)
        return position

    def slice(self, position: int, size: int, next_offset: int | None = None,
              data: bytes | memoryview | None = None) -> FetchSlice:
        return FetchSlice(self._handle, position, size, next_offset, data) if size > 0 \
            else EMPTY_SLICE

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def map(self) -> mmap.mmap | bytes | None:
        """The whole file to read (None if empty): a read-only map, unmapped when dropped, or
        for a small file its bytes (one pread costs less than a map's five system calls, and a
        partition's recovery after a crash maps its active segment four times)."""
        length = os.fstat(self.fd).st_size
        if not length:
            return None
        if length <= SMALL_FILE_BYTES:
            return os.pread(self.fd, length, 0)
        return mmap.mmap(self.fd, length, prot=mmap.PROT_READ)

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch in [start, end or size).

        Raises CorruptRecordError at a malformed batch, as `iter_headers` does.
        """
        end = self.size if end is None else min(end, self.size)
        if start >= end:
            return iter(())
        mm = self.map()
        return iter_headers(mm, start, end) if mm is not None else iter(())

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes; returns how many were removed."""
        if size > self.size:
            raise ValueError(f"cannot truncate {self.path} of {self.size} bytes up to {size}")
        removed = os.fstat(self.fd).st_size - size
        self.fs.truncate(self.fd, size)
        self.size = size
        return removed

    def trim(self) -> None:
        """Drop the preallocated tail, if any."""
        if os.fstat(self.fd).st_size != self.size:
            self.fs.truncate(self.fd, self.size)

    def flush(self) -> None:
        self.fs.fsync(self.fd)

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self.path).st_mtime_ns // 1_000_000

    def rename(self, new_path: str) -> None:
        self.fs.rename(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        """Release this file's hold on the fd; open slices keep it alive until dropped."""
        self._handle = None

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.fs.remove(self.path)
