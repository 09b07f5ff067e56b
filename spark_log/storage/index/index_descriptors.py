"""The descriptors kept open for writing index entries: a bounded, least-recently-used set.

An index entry is a positioned write of a few bytes. Opening and closing the file around each
one cost a 1 MiB append 24 µs of its 363 µs; an index written recently keeps its descriptor
instead. The set is bounded, so a broker holding 10,000 partitions keeps descriptors only for
the indexes being written now, not one per partition.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

from spark_log.storage.filesystem import Buffer, FileSystem

DEFAULT_CAPACITY = 512  # two indexes per active segment: 256 partitions written at once


class IndexDescriptors:
    """Open descriptors of index files, each owned by one holder (an index object).

    Invariants: at most `capacity` descriptors are open; a holder has at most one, opened on
    the holder's path when it first writes and closed when the holder drops it or when
    `capacity` newer writers push it out. Holders are keys by identity and kept alive while
    their descriptor is open, so a number is never reused for another holder. Thread-safe: the
    lock is held across each write, so an eviction on another thread (the cleaner's worker) can
    neither close a descriptor being written through nor let its number be reused mid-write.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[object, tuple[int, FileSystem]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def holds(self, holder: object) -> bool:
        return holder in self._open

    def write(self, holder: object, path: str, fs: FileSystem, buffers: Sequence[Buffer],
              offset: int) -> None:
        """Write `buffers` at `offset` of `holder`'s file, opening it (at `path`) if needed."""
        with self._lock:
            held = self._open.get(holder)
            if held is None:
                fd = fs.open(path, os.O_RDWR | os.O_CREAT)
                self._open[holder] = (fd, fs)
                if len(self._open) > self.capacity:
                    _, (old_fd, old_fs) = self._open.popitem(last=False)
                    old_fs.close(old_fd)
            else:
                fd = held[0]
                self._open.move_to_end(holder)
            fs.write_fully(fd, buffers, offset)

    def drop(self, holder: object) -> None:
        """Close `holder`'s descriptor, if it has one (before its file is closed, trimmed by
        another path, deleted, or replaced)."""
        with self._lock:
            held = self._open.pop(holder, None)
            if held is not None:
                held[1].close(held[0])


INDEX_DESCRIPTORS = IndexDescriptors()
