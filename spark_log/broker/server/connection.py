"""One client connection: bytes from the socket -> frames -> requests -> responses, in order.

Like Kafka's SocketServer, a connection handles one request at a time and answers in request
order. Two refinements for producers that pipeline: an acks=all Produce waiting for its ISR is
owed (`Later`) while the next requests are handled, and the answers to Produce requests that
arrived in one read are written together, in one send. Other connections are independent
coroutines, so a fetch long-polling here never blocks them. A malformed or hostile frame closes
this connection with a log line and touches nothing else; so does a peer that goes away
mid-response (a DEBUG line only).

File regions in a response go out with `loop.sendfile`: os.sendfile where the transport allows
(plain TCP), else asyncio's read-and-write fallback (TLS). A region found shorter on disk than
the size already announced (its log was truncated) closes the connection, so a client never
waits on, or misreads, a frame shorter than its size prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spark_log.protocol import FrameDecoder, ProtocolError

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024


class FileRegion(Protocol):
    """A slice of an open file to send with os.sendfile (storage's FetchSlice satisfies it). A
    region may also have `data`, its bytes when the read that cut it copied them already."""

    size: int
    position: int

    def fileno(self) -> int: ...


class RegionShrank(Exception):
    """A file region ended early: its log was truncated after the response was sized, so the
    frame already promised bytes that no longer exist."""


class _RegionFile:
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
MAX_OWED = 50  # responses a connection may owe at once
COALESCE_BYTES = 64 * 1024  # in-memory parts up to this size are joined before sending
SMALL_REGION_BYTES = 16 * 1024  # file regions up to this size are copied, not sendfile'd


@dataclass(frozen=True)
class Later:
    """A response that comes later — an acks=all produce waiting for its records to reach the
    ISR: the connection goes on reading and handling the next requests meanwhile, and writes
    every response in request order."""

    parts: Awaitable[Sequence[Part] | None]


@dataclass
class Peer:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def _answered_at_once(frame: memoryview) -> bool:
    """Whether this request's answer is ready as soon as it is handled: a Produce (API key 0)
    never long-polls (an acks=all wait answers Later), where a Fetch may wait max_wait_ms."""
    return len(frame) >= 2 and frame[0] == 0 and frame[1] == 0


def _coalesced(parts: Sequence[Part]) -> list[Part]:
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
            run.append(_read_region(part) if data is None else data)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
        out.append(part)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


def _read_region(region: FileRegion) -> bytes:
    data = os.pread(region.fileno(), region.size, region.position)
    if len(data) != region.size:
        raise RegionShrank(f"{region.size - len(data)} of {region.size} bytes of a fetched "
                           f"log range were gone (log truncated mid-response)")
    return data


class Connection:
    """Reads frames from `reader`, asks `respond(frame, peer)` for the response parts, writes them.

    `respond` returns None when no response is due (acks=0), `Later` for a response that must
    wait (the next requests are handled meanwhile, up to MAX_OWED owed responses), and raises
    ProtocolError for a request that must close the connection. Invariant: responses are
    written in request order — while any is owed, the others queue behind it (`_owed`, written
    by one task, an entry leaving only once written).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        respond: Callable[[memoryview, Peer], Awaitable[Sequence[Part] | Later | None]],
        max_frame_bytes: int,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._respond = respond
        self._decoder = FrameDecoder(max_frame_bytes)
        host, port = writer.get_extra_info("peername")[:2]
        self.peer = Peer(host, port)
        self._closing = False
        self._idle = True  # waiting for bytes, not handling a request
        self._task: asyncio.Task[None] | None = None
        self._owed: deque[asyncio.Future[Sequence[Part] | None]] = deque()
        self._owed_writer: asyncio.Task[None] | None = None
        self._owed_written = asyncio.Event()

    def close_when_idle(self) -> None:
        """Shutdown: end the connection now if it waits for a request and owes no response,
        else right after the responses to the requests in hand (so an append is never answered
        half way)."""
        self._closing = True
        if self._idle and not self._owed and self._task is not None:
            self._task.cancel()

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            await self._serve()
        except asyncio.CancelledError:
            if not self._closing:
                raise
        except (ProtocolError, RegionShrank) as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
        finally:
            if self._owed_writer is not None:
                self._owed_writer.cancel()
            for owed in self._owed:
                owed.cancel()
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()

    async def _serve(self) -> None:
        while not self._closing:
            data = await self._reader.read(READ_CHUNK)
            if not data:
                return
            self._idle = False
            # Answers ready while more Produce requests are in hand are held and written with
            # the next ones, one send for many (a pipelining producer sends dozens per read).
            held: list[Part] = []
            for frame in self._decoder.feed(data):
                if held and not _answered_at_once(frame):
                    held = await self._flush(held)
                try:
                    result = await self._respond(memoryview(frame), self.peer)
                except Exception:
                    await self._flush(held)  # the requests before this one are answered
                    raise
                if isinstance(result, Later):
                    held = await self._flush(held)
                    self._owe(asyncio.ensure_future(result.parts))
                    await self._until_owed(MAX_OWED - 1)
                elif self._owed:  # answered already, but behind what is owed
                    if result:
                        done: asyncio.Future[Sequence[Part] | None] = \
                            asyncio.get_running_loop().create_future()
                        done.set_result(result)
                        self._owe(done)
                elif result:
                    held.extend(result)
                if self._closing:
                    await self._flush(held)
                    await self._until_owed(0)
                    return
            await self._flush(held)
            self._idle = True

    async def _flush(self, held: list[Part]) -> list[Part]:
        """Write the held answers; a new empty list to hold the next ones."""
        if held:
            await self._write(held)
            return []
        return held

    def _owe(self, response: asyncio.Future[Sequence[Part] | None]) -> None:
        self._owed.append(response)
        if self._owed_writer is None or self._owed_writer.done():
            self._owed_writer = asyncio.create_task(self._write_owed())

    async def _write_owed(self) -> None:
        """Write owed responses in order as each is ready; any failure ends the connection."""
        try:
            while self._owed:
                parts = await self._owed[0]
                if parts:
                    await self._write(parts)
                self._owed.popleft()
                self._owed_written.set()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("closing connection from %s: a response failed: %s", self.peer, e)
            self._closing = True
            self._owed.clear()
            if self._task is not None:
                self._task.cancel()
            return
        if self._closing and self._idle and self._task is not None:
            self._task.cancel()  # shutdown waited for these

    async def _until_owed(self, most: int) -> None:
        """Wait until at most `most` responses are owed."""
        while len(self._owed) > most:
            self._owed_written.clear()
            await self._owed_written.wait()

    async def _write(self, parts: Sequence[Part]) -> None:
        for part in _coalesced(parts):
            # A lost peer ends the response here, not after every remaining part is discarded
            # by the transport (which warns from the fifth write on).
            self._check_open()
            if isinstance(part, (bytes, bytearray, memoryview)):
                self._writer.write(part)
            elif part.size:
                await self._send_region(part)
        await self._writer.drain()

    async def _send_region(self, region: FileRegion) -> None:
        """os.sendfile where the transport can, else asyncio's read-and-write fallback."""
        await self._drain_fully()
        self._check_open()  # loop.sendfile raises RuntimeError on a closing transport
        loop = asyncio.get_running_loop()
        sent = await loop.sendfile(self._writer.transport, _RegionFile(region),
                                   region.position, region.size)
        if sent != region.size:
            raise RegionShrank(f"{region.size - sent} of {region.size} bytes of a fetched "
                               f"log range were gone (log truncated mid-response)")

    async def _drain_fully(self) -> None:
        """Wait until the transport holds no unsent bytes. asyncio's native sendfile would wait
        for them itself, and a peer lost during that wait makes it (3.11) resolve one future
        twice and log an InvalidStateError; waiting here, drain raises ConnectionResetError."""
        transport = self._writer.transport
        if not transport.get_write_buffer_size():
            return
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0)  # paused until the buffer is empty
        try:
            await self._writer.drain()
        finally:
            transport.set_write_buffer_limits(high=high, low=low)

    def _check_open(self) -> None:
        if self._writer.transport.is_closing():
            raise ConnectionResetError("connection lost mid-response")
