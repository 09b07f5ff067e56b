"""What offset and time indexes share: a memory-mapped file of fixed-size entries, opened lazily.

Kafka's AbstractIndex + LazyIndex. An index is created preallocated (sparse) to
segment.index.bytes (rounded down to whole entries) while its segment is active, and trimmed to
its entries when the segment is rolled or closed, so a trimmed file's size tells its entry
count. Nothing is opened or read until the first lookup or append, so opening a log with many
segments costs no index I/O. Lookups are binary searches for the largest entry whose key is <=
the target.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator

from spark_log.storage.errors import CorruptIndexError
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem


class IndexFile:
    """Entries of `ENTRY.size` bytes at the start of the file; `entries` of them are valid.

    Invariants: entries <= max_entries; entry keys (offsets, or timestamps) strictly increase;
    the file is exactly `entries * entry_size` long whenever the index is not writable.
    Not thread-safe: one log owns it.
    """

    ENTRY: struct.Struct  # set by subclasses

    def __init__(self, path: str, base_offset: int, max_index_size: int, *,
                 writable: bool = False, fs: FileSystem = DEFAULT_FS) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.fs = fs
        self._writable = writable
        self._fd: int | None = None
        self._mm: mmap.mmap | None = None
        self._length = 0
        self._entries = 0

    # ---- lazy opening -------------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._fd is not None

    def load(self) -> None:
        """Open and map the file (creating it if missing); a writable index grows to its max."""
        if self._fd is not None:
            return
        fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT)
        self._fd = fd
        size = os.fstat(fd).st_size
        self._entries = size // self.ENTRY.size
        self._length = size
        self._map(size)
        if self._writable:
            self.resize(self.max_index_size)

    def _map(self, length: int) -> None:
        self._mm = mmap.mmap(self._fd, length) if length > 0 else None  # type: ignore[arg-type]

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    @property
    def file_size(self) -> int:
        """Size on disk without loading (0 when missing)."""
        if self._fd is not None:
            return self._length
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

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
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def resize(self, new_size: int) -> None:
        """Set the file length to `new_size` rounded down to whole entries, keeping entries."""
        self.load()
        size = max(new_size - new_size % self.ENTRY.size, self._entries * self.ENTRY.size)
        if size == self._length:
            return
        self._unmap()
        self.fs.truncate(self._fd, size)  # type: ignore[arg-type]
        self._length = size
        self._map(size)

    def set_writable(self, writable: bool) -> None:
        """Active segments' indexes are writable (preallocated); others are trimmed."""
        self._writable = writable
        if self._fd is not None:
            self.resize(self.max_index_size if writable else 0)

    def trim_to_valid_size(self) -> None:
        self.resize(0)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.load()
        self._entries = 0
        self._unmap()
        self.fs.truncate(self._fd, 0)  # type: ignore[arg-type]
        self._length = 0
        self.resize(self.max_index_size if self._writable else 0)
        self._reset_cache()

    def _truncate_entries(self, count: int) -> None:
        self._entries = count
        self._reset_cache()
        if not self._writable:
            self.trim_to_valid_size()

    def _reset_cache(self) -> None:
        """Subclasses cache their last entry."""

    # ---- entries ------------------------------------------------------------------------

    def _raw(self, slot: int) -> tuple:
        return self.ENTRY.unpack_from(self._mm, slot * self.ENTRY.size)  # type: ignore[arg-type]

    def _write_raw(self, *fields: int) -> None:
        if self._entries >= self._length // self.ENTRY.size:
            raise CorruptIndexError(f"attempt to append to a full index {self.path} "
                                    f"({self._entries} entries)")
        # Written with pwrite, read through the map: a full disk is then an OSError here, not
        # a SIGBUS when the kernel cannot back a page of the (sparse) file the map touches.
        self.fs.write_fully(self._fd, [self.ENTRY.pack(*fields)],  # type: ignore[arg-type]
                            self._entries * self.ENTRY.size)
        self._entries += 1

    def raw_entries(self) -> Iterator[tuple]:
        self.load()
        if self._entries:
            # A copy, not a memoryview: an exported view would stop the mmap from closing.
            yield from self.ENTRY.iter_unpack(self._mm[: self._entries * self.ENTRY.size])  # type: ignore

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

    def check_size(self) -> str | None:
        """The cheap check possible without opening: size a whole number of entries."""
        size = self.file_size
        if size % self.ENTRY.size:
            return f"size {size} is not a multiple of the entry size {self.ENTRY.size}"
        return None

    # ---- durability ---------------------------------------------------------------------

    def flush(self) -> None:
        if self._fd is None:
            return
        if self._mm is not None:
            self._mm.flush()
        self.fs.fsync(self._fd)

    def close(self, *, sync: bool = False) -> None:
        """Trim (if writable), fsync if asked, and release the file; it can be loaded again."""
        if self._fd is None:
            return
        if self._writable:
            self.trim_to_valid_size()
        if sync:
            self.flush()
        self.release()

    def release(self) -> None:
        """Unmap and close without touching the file (also used after a storage failure)."""
        if self._fd is None:
            return
        self._unmap()
        fd, self._fd = self._fd, None
        self.fs.close(fd)

    def rename(self, new_path: str) -> None:
        self.fs.rename(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        self.release()
        with contextlib.suppress(FileNotFoundError):
            self.fs.remove(self.path)
