"""The parts a response is written in, and how they go out: bytes, and slices of log files
(`FileRegion`) sent with os.sendfile. Runs of small parts are joined so a response (or many)
goes out in one send, and a small file region is read into the run; a region found shorter on
disk than announced raises `RegionShrank`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Protocol

COALESCE_BYTES = 64 * 1024  # in-memory parts up to this size are joined before sending
SMALL_REGION_BYTES = 16 * 1024  # file regions up to this size are copied, not sendfile'd


class FileRegion(Protocol):
    """A slice of an open file to send with os.sendfile (storage's FetchSlice satisfies it). A
    region may also have `data`, its bytes when the read that cut it copied them already."""

    size: int
    position: int

    def fileno(self) -> int: ...


class RegionShrank(Exception):
    """A file region ended early: its log was truncated after the response was sized, so the
    frame already promised bytes that no longer exist."""


class RegionFile:
    """A file object over one FileRegion, for `loop.sendfile`.

    The native path uses only `fileno()` (asyncio passes the offset to os.sendfile itself).
    asyncio's fallback (TLS transports, loops without native sendfile, or a native attempt that
    gave up before sending a byte) seeks to the region's start and calls `readinto` from an
    executor thread until it has the region or a read comes back empty.

    Invariants: reads are positioned (the fd's shared offset is never used, so other slices of
    the same file are undisturbed) and never go past the region's end. Holding the region keeps
    its file open while a thread reads it. (asyncio's native path lseeks the fd when done; no
    reader of a log file depends on that offset.)
    """

    def __init__(self, region: FileRegion) -> None:
        self._region = region
        self._fd = region.fileno()
        self._end = region.position + region.size
        self._pos = region.position

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence != os.SEEK_SET:
            raise io.UnsupportedOperation("only absolute seeks")
        self._pos = offset
        return offset

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: memoryview) -> int:
        """Read up to len(buffer) bytes of the region at the current position; 0 at its end or
        at the end of the file (shorter than the region if the log was truncated)."""
        want = min(len(buffer), self._end - self._pos)
        if want <= 0:
            return 0
        got = os.preadv(self._fd, [buffer[:want]], self._pos)
        self._pos += got
        return got


Part = bytes | bytearray | memoryview | FileRegion


def coalesced(parts: Sequence[Part]) -> list[Part]:
    """`parts` with each run of small parts joined into one, so a response (or many) goes out
    in one send; large parts and file regions stay as they are. A small file region is read
    into the run: `loop.sendfile` costs two epoll registrations and a future per call, more
    than copying a few KiB (a fetch of one small batch)."""
    out: list[Part] = []
    run: list[bytes | bytearray | memoryview] = []
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            if len(part) <= COALESCE_BYTES:
                run.append(part)
                continue
        elif 0 < part.size <= SMALL_REGION_BYTES:
            data = getattr(part, "data", None)  # a small read's bytes, copied already
            run.append(read_region(part) if data is None else data)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
        out.append(part)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


def read_region(region: FileRegion) -> bytes:
    data = os.pread(region.fileno(), region.size, region.position)
    if len(data) != region.size:
        raise RegionShrank(f"{region.size - len(data)} of {region.size} bytes of a fetched "
                           f"log range were gone (log truncated mid-response)")
    return data
