"""What offset and time indexes share: a file of fixed-size entries, opened lazily.

Kafka's AbstractIndex + LazyIndex. An index is created preallocated (sparse) to
segment.index.bytes (rounded down to whole entries) while its segment is active, and trimmed to
its entries when the segment is rolled or closed, so a trimmed file's size tells its entry
count. A rolled segment's index is read through a memory map; an active one's entries are kept
in memory (a few bytes each) and written with pwrite, through a descriptor that stays open
only while the index is among the most recently written (`IndexDescriptors`). Nothing is opened
or read until the first lookup or append, so opening a log with many segments costs no index
I/O. Lookups are binary searches for the largest entry whose key is <= the target.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem
from spark_log.storage.index.index_descriptors import INDEX_DESCRIPTORS, IndexDescriptors


class IndexFile:
    """Entries of `ENTRY.size` bytes at the start of the file; `entries` of them are valid.

    Invariants: entries <= max_entries; entry keys (offsets, or timestamps) strictly increase;
    the file is exactly `entries * entry_size` long whenever the index is not writable. A loaded
    index holds at most one file descriptor, so a broker with many partitions stays within its
    descriptor limit: a writable (active) index keeps its valid entries in memory (`_buf`),
    writes through a descriptor `descriptors` keeps open while it is among the most recently
    written, and opens the file only to resize or sync it; a read-only index keeps only its map
    (which holds a descriptor of its own). Not thread-safe: one log owns it.
    """

    ENTRY: struct.Struct  # set by subclasses
    RESERVED_SLOTS = 0  # slots kept free by `is_full` (the time index keeps one for its roll)

    def __init__(self, path: str, base_offset: int, max_index_size: int, *,
                 writable: bool = False, fs: FileSystem = DEFAULT_FS,
                 descriptors: IndexDescriptors = INDEX_DESCRIPTORS) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.fs = fs
        self._descriptors = descriptors
        self._writable = writable
        self._loaded = False
        self._mm: mmap.mmap | None = None  # a read-only index's entries
        self._buf: bytearray | None = None  # a writable index's entries
        self._length = 0
        self._entries = 0

    # ---- lazy opening -------------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    @contextlib.contextmanager
    def _file(self) -> Iterator[int]:
        fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT)
        try:
            yield fd
        finally:
            self.fs.close(fd)

    def load(self) -> None:
        """Read (writable) or map (read-only) the file, creating it if missing; a writable
        index grows to its max."""
        if self._loaded:
            return
        with self._file() as fd:
            size = os.fstat(fd).st_size
            self._entries = size // self.ENTRY.size
            self._length = size
            if self._writable:
                self._buf = bytearray(_pread_fully(fd, self._entries * self.ENTRY.size))
                grown = self._whole(self.max_index_size)
                if grown != size:
                    self.fs.truncate(fd, grown)
                    self._length = grown
            else:
                self._map(fd, size)
        self._loaded = True

    def _whole(self, size: int) -> int:
        """`size` rounded down to whole entries, but room for every entry held."""
        return max(size - size % self.ENTRY.size, self._entries * self.ENTRY.size)

    def _map(self, fd: int, length: int) -> None:
        self._mm = mmap.mmap(fd, length) if length > 0 else None

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    @property
    def file_size(self) -> int:
        """Size on disk without loading (0 when missing)."""
        size = self.size_on_disk()
        return 0 if size is None else size

    def size_on_disk(self) -> int | None:
        """The file's size without opening it (one stat), None when it is missing."""
        if self._loaded:
            return self._length
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return None

    # ---- size management ----------------------------------------------------------------

    @property
    def entries(self) -> int:
        self.load()
        return self._entries

    @property
    def max_entries(self) -> int:
        self.load()
        return self._length // self.ENTRY.size

    @property
    def is_full(self) -> bool:  # asked before every append: fields, not the properties
        if not self._loaded:
            self.load()
        return self._entries >= self._length // self.ENTRY.size - self.RESERVED_SLOTS

    def resize(self, new_size: int) -> None:
        """Set the file length to `new_size` rounded down to whole entries, keeping entries."""
        self.load()
        size = self._whole(new_size)
        if size == self._length:
            return
        self._unmap()
        with self._file() as fd:
            self.fs.truncate(fd, size)
            self._length = size
            if not self._writable:
                self._map(fd, size)

    def set_writable(self, writable: bool) -> None:
        """Active segments' indexes are writable (preallocated); others are trimmed."""
        if writable == self._writable:
            if self._loaded:
                self.resize(self.max_index_size if writable else 0)
            return
        if not self._loaded:
            self._writable = writable
            return
        valid = self._entries * self.ENTRY.size
        if writable:  # entries move from the map to memory
            self._buf = bytearray(self._mm[:valid]) if self._mm is not None else bytearray()
            self._unmap()
            self._writable = True
            self.resize(self.max_index_size)
        else:  # trimmed, then mapped; a rolled index is not written again
            self._descriptors.drop(self)
            self._buf = None
            self._writable = False
            with self._file() as fd:
                self.fs.truncate(fd, valid)
                self._length = valid
                self._map(fd, valid)

    def trim_to_valid_size(self) -> None:
        self.resize(0)

    def reset(self) -> None:
        """Drop every entry (before a rebuild). Nothing of the file is read."""
        self._unmap()
        self._descriptors.drop(self)  # the file may have been replaced under its path
        self._loaded, self._entries = True, 0
        self._buf = bytearray() if self._writable else None
        self._length = self._whole(self.max_index_size) if self._writable else 0
        with self._file() as fd:
            # A writable index keeps its entry count in memory, so stale bytes past it are never
            # read: it is only sized, not emptied (emptying a crashed, preallocated index costs
            # the file system a journal commit).
            self.fs.truncate(fd, self._length)
        self._reset_cache()

    def _truncate_entries(self, count: int) -> None:
        self._entries = count
        self._reset_cache()
        if self._buf is not None:
            del self._buf[count * self.ENTRY.size:]
        if not self._writable:
            self.trim_to_valid_size()

    def _reset_cache(self) -> None:
        """Subclasses cache their last entry."""

    # ---- entries ------------------------------------------------------------------------

    def _raw(self, slot: int) -> tuple:
        view = self._buf if self._buf is not None else self._mm
        return self.ENTRY.unpack_from(view, slot * self.ENTRY.size)  # type: ignore[arg-type]

    def _write_raw(self, *fields: int) -> None:
        if self._entries >= self._length // self.ENTRY.size:
            raise CorruptIndexError(f"attempt to append to a full index {self.path} "
                                    f"({self._entries} entries)")
        # Written with pwrite, never through a map: a full disk is then an OSError here, not
        # a SIGBUS when the kernel cannot back a page of the (sparse) file.
        entry = self.ENTRY.pack(*fields)
        self._descriptors.write(self, self.path, self.fs, [entry], self._entries * self.ENTRY.size)
        if self._buf is not None:
            self._buf += entry  # (a read-only index's map shows what pwrite wrote)
        self._entries += 1

    def raw_entries(self) -> Iterator[tuple]:
        self.load()
        if self._entries:
            # A copy, not a memoryview: an exported view would stop the mmap from closing (or
            # the buffer from growing).
            view = self._buf if self._buf is not None else self._mm
            yield from self.ENTRY.iter_unpack(view[: self._entries * self.ENTRY.size])  # type: ignore

    def _largest_lower_bound(self, target: int, field: int) -> int:
        """Slot of the largest entry whose `field` is <= target, or -1."""
        self.load()
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._raw(0)[field] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._raw(mid)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _first_slot_at_least(self, target: int, field: int) -> int:
        """Slot of the first entry whose `field` is >= target (== entries when none)."""
        slot = self._largest_lower_bound(target, field)
        if slot >= 0 and self._raw(slot)[field] == target:
            return slot
        return slot + 1

    def relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise CorruptIndexError(
                f"offset {offset} does not fit an index with base offset {self.base_offset}")
        return rel

    def check_size(self, size: int | None = None) -> str | None:
        """The cheap check possible without opening: size (default: on disk) a whole number of
        entries."""
        size = self.file_size if size is None else size
        if size % self.ENTRY.size:
            return f"size {size} is not a multiple of the entry size {self.ENTRY.size}"
        return None

    # ---- durability ---------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the file (entries are written with pwrite, so the page cache has them all)."""
        if not self._loaded:
            return
        with self._file() as fd:
            self.fs.fsync(fd)

    def close(self, *, sync: bool = False) -> None:
        """Trim (if writable), fsync if asked, and release the file; it can be loaded again."""
        if not self._loaded:
            return
        valid = self._entries * self.ENTRY.size
        if sync or (self._writable and self._length != valid):
            self._unmap()
            with self._file() as fd:  # one open for both
                if self._writable and self._length != valid:
                    self.fs.truncate(fd, valid)
                if sync:
                    self.fs.fsync(fd)
        self.release()

    def release(self) -> None:
        """Unmap and close without touching the file (also used after a storage failure)."""
        self._unmap()
        self._descriptors.drop(self)
        self._buf = None
        self._loaded = False

    def rename(self, new_path: str) -> None:
        self.fs.rename(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        self.release()
        with contextlib.suppress(FileNotFoundError):
            self.fs.remove(self.path)


def _pread_fully(fd: int, size: int) -> bytes:
    chunks, position = [], 0
    while position < size:
        chunk = os.pread(fd, size - position, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)
