"""One client connection: bytes from the socket -> frames -> requests -> responses, in order.

Like Kafka's SocketServer, a connection handles one request at a time: the next frame is not
dispatched until the previous response is written (or, for acks=0 produce, needs no response),
so responses always go back in request order. Other connections are independent coroutines, so a
fetch long-polling here never blocks them. A malformed or hostile frame closes this connection
with a log line and touches nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spark_log.protocol import FrameDecoder, ProtocolError

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024


class FileRegion(Protocol):
    """A slice of an open file to send with os.sendfile (storage's FetchSlice satisfies it)."""

    size: int
    position: int

    def fileno(self) -> int: ...


class _SendfileSource:
    """What asyncio's sendfile needs of a file: a descriptor, and a seek it may call at the end
    (positions are passed explicitly, so the seek is meaningless here)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


Part = bytes | bytearray | memoryview | FileRegion


@dataclass
class Peer:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class Connection:
    """Reads frames from `reader`, asks `respond(frame, peer)` for the response parts, writes them.

    `respond` returns None when no response is due (acks=0) and raises ProtocolError for a
    request that must close the connection.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        respond: Callable[[memoryview, Peer], Awaitable[Sequence[Part] | None]],
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

    def close_when_idle(self) -> None:
        """Shutdown: end the connection now if it waits for a request, else right after the
        response to the request in hand (so an append is never answered half way)."""
        self._closing = True
        if self._idle and self._task is not None:
            self._task.cancel()

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            await self._serve()
        except asyncio.CancelledError:
            if not self._closing:
                raise
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
        finally:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()

    async def _serve(self) -> None:
        while not self._closing:
            data = await self._reader.read(READ_CHUNK)
            if not data:
                return
            self._idle = False
            for frame in self._decoder.feed(data):
                parts = await self._respond(memoryview(frame), self.peer)
                if parts:
                    await self._write(parts)
                if self._closing:
                    return
            self._idle = True

    async def _write(self, parts: Sequence[Part]) -> None:
        loop = asyncio.get_running_loop()
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                self._writer.write(part)
            else:
                if part.size == 0:
                    continue
                await self._writer.drain()
                await loop.sendfile(self._writer.transport, _SendfileSource(part.fileno()),
                                    part.position, part.size)
        await self._writer.drain()
