"""Kafka's message framing: a 4-byte big-endian size, then that many bytes.

`FrameDecoder` turns the byte stream of one connection into whole frames (without the size
prefix); `size_prefix` writes the prefix for an outgoing frame. No sockets here: the broker feeds
whatever the socket delivered and gets back the frames that became complete.
"""

from __future__ import annotations

import struct

from .errors import FrameError

__all__ = ["SIZE_PREFIX", "FrameDecoder", "size_prefix"]

SIZE_PREFIX = struct.Struct(">i")
_PREFIX_LEN = SIZE_PREFIX.size


def size_prefix(size: int) -> bytes:
    """The 4-byte prefix announcing a frame of `size` bytes."""
    return SIZE_PREFIX.pack(size)


class FrameDecoder:
    """Splits one connection's byte stream into frames.

    Invariants:
    * Every size prefix is checked the moment its 4 bytes are known: a value <= 0 or above
      `max_frame_bytes` raises `FrameError` before any body byte is buffered, so a hostile
      prefix cannot make us allocate. After that error every `feed` raises again.
    * Each body byte is copied at most once. A frame that arrives whole inside one read-only
      `feed` is returned as a zero-copy `memoryview` of that input; a frame spread over several
      feeds is kept as views of those inputs and joined once, when its last byte arrives.
    * Frames are returned in stream order; `buffered_bytes` counts bytes held for the next one.
    """

    __slots__ = ("_body", "_failed", "_have", "_max", "_need", "_prefix")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self._max = max_frame_bytes
        self._prefix = bytearray()  # a size prefix split across feeds
        self._body: list[memoryview] | None = None  # pieces of the frame being accumulated
        self._have = 0  # bytes in `_body`
        self._need = 0  # body bytes still missing from `_body`
        self._failed: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that belong to a frame not yet complete."""
        return len(self._prefix) + self._have

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Consume `data`; return the frames it completed, each without its size prefix.

        The returned views may point into `data` when it is read-only (`bytes`); writable
        input is copied first, since the caller may reuse its buffer.
        """
        if self._failed is not None:
            raise FrameError(f"stream already failed: {self._failed}")
        view = memoryview(data)
        if not view.readonly:
            view = memoryview(bytes(view))
        view = view.cast("B")
        frames: list[memoryview] = []
        try:
            pos = self._finish_pending(view, frames)
            self._split_whole(view, pos, frames)
        except FrameError as exc:
            self._failed = exc
            raise
        return frames

    def _finish_pending(self, view: memoryview, frames: list[memoryview]) -> int:
        """Complete a prefix or body carried over from earlier feeds; return bytes consumed."""
        pos = 0
        if self._prefix:
            take = min(_PREFIX_LEN - len(self._prefix), len(view))
            self._prefix += view[:take]
            pos = take
            if len(self._prefix) < _PREFIX_LEN:
                return pos
            self._start_body(self._check_size(SIZE_PREFIX.unpack(self._prefix)[0]))
            self._prefix.clear()
        if self._body is not None:
            take = min(self._need, len(view) - pos)
            self._add(view[pos : pos + take])
            pos += take
            if self._need == 0:
                frames.append(memoryview(b"".join(self._body)))
                self._body = None
                self._have = 0
        return pos

    def _split_whole(self, view: memoryview, pos: int, frames: list[memoryview]) -> None:
        """Slice whole frames out of `view` from `pos`; keep any incomplete tail."""
        if self._body is not None:  # the pending body swallowed all of this feed
            return
        end = len(view)
        while end - pos >= _PREFIX_LEN:
            size = self._check_size(SIZE_PREFIX.unpack_from(view, pos)[0])
            pos += _PREFIX_LEN
            if end - pos < size:
                self._start_body(size)
                self._add(view[pos:end])
                return
            frames.append(view[pos : pos + size])
            pos += size
        self._prefix += view[pos:end]

    def _start_body(self, size: int) -> None:
        self._body = []
        self._need = size

    def _add(self, piece: memoryview) -> None:
        assert self._body is not None
        if piece:
            self._body.append(piece)
            self._have += len(piece)
            self._need -= len(piece)

    def _check_size(self, size: int) -> int:
        if size <= 0:
            raise FrameError(f"invalid frame size {size}: must be positive")
        if size > self._max:
            raise FrameError(f"frame size {size} exceeds the maximum of {self._max} bytes")
        return size
