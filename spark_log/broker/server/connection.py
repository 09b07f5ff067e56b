"""One client connection: bytes from the socket -> frames -> requests -> responses, in order.

Like Kafka's SocketServer, a connection handles one request at a time and answers in request
order. Two refinements for producers that pipeline: an acks=all Produce waiting for its ISR is
owed (`Later`) while the next requests are handled, and the answers to Produce requests that
arrived together are written together, in one send. Other connections are independent, so a
fetch long-polling here never blocks them. A malformed or hostile frame closes this connection
with a log line and touches nothing else; so does a peer that goes away mid-response (a DEBUG
line only).

The connection is an asyncio Protocol, and a request is handled as soon as its bytes arrive,
inside the event loop's read callback: most requests (a Produce with acks=1, a Fetch with
records waiting) never wait for anything, and answering them there saves a stream reader's
futures and a second turn of the event loop per request. A request whose handling does wait
(a long-polling Fetch, a full send buffer) is resumed by a callback on what it waits for, as a
task would resume it, and the requests that arrive meanwhile queue behind it (reading pauses
once PENDING_BYTES of them wait).

File regions in a response go out with `loop.sendfile`: os.sendfile where the transport allows
(plain TCP), else asyncio's read-and-write fallback (TLS). A region found shorter on disk than
the size already announced (its log was truncated) closes the connection, so a client never
waits on, or misreads, a frame shorter than its size prefix.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from spark_log.broker.server.response_parts import (
    FileRegion,
    Part,
    RegionFile,
    RegionShrank,
    coalesced,
)
from spark_log.protocol import FrameDecoder, ProtocolError

log = logging.getLogger(__name__)

PENDING_BYTES = 256 * 1024  # frames waiting behind a request in hand before reading pauses
MAX_OWED = 50  # responses a connection may owe at once


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


class Connection(asyncio.Protocol):
    """Splits the bytes `data_received` brings into frames, asks `respond(frame, peer)` for
    each one's response parts, writes them.

    `respond` returns None when no response is due (acks=0), `Later` for a response that must
    wait (the next requests are handled meanwhile, up to MAX_OWED owed responses), and raises
    ProtocolError for a request that must close the connection. Invariants: one request is
    handled at a time, in arrival order (`_busy` while one is, its successors queued in
    `_frames`); responses are written in request order — while any is owed, the others queue
    behind it (`_owed`, written by one task, an entry leaving only once written); `wait_closed`
    resolves once the peer is gone and no request is in hand.
    """

    def __init__(
        self,
        respond: Callable[[memoryview, Peer], Awaitable[Sequence[Part] | Later | None]],
        max_frame_bytes: int,
        on_closed: Callable[[Connection], None] | None = None,
    ) -> None:
        self._respond = respond
        self._decoder = FrameDecoder(max_frame_bytes)
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self.peer = Peer("", 0)
        self._frames: deque[memoryview | ProtocolError] = deque()
        self._pending = 0  # bytes in `_frames`
        self._busy = False  # a request is in hand
        # What the request in hand waits on, when it had to wait (see `_step`).
        self._waiting_on: asyncio.Future[Any] | None = None
        self._must_cancel = False
        self._closing = False
        self._eof = False
        self._over_tls = False
        self._lost = False
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._owed: deque[asyncio.Future[Sequence[Part] | None]] = deque()
        self._owed_writer: asyncio.Task[None] | None = None
        self._owed_written = asyncio.Event()

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._over_tls = transport.get_extra_info("sslcontext") is not None
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = Peer(peer[0], peer[1])
        if self._closing:  # shutdown began between the accept and this call
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self._lost or self._closing:
            return
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:  # answer what came before, then close
            self._frames.append(e)
            self._pause_reading()
        else:
            self._frames.extend(frames)
            self._pending += sum(map(len, frames))
        if not self._busy:
            self._start()
        elif self._pending + self._decoder.buffered_bytes >= PENDING_BYTES:
            self._pause_reading()

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it sent, then close."""
        self._eof = True
        if not self._busy:
            self.close_when_idle()
        return not self._over_tls  # TLS cannot stay half open

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_drain(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake_drain(ConnectionResetError("connection lost"))
        if self._owed_writer is not None:
            self._owed_writer.cancel()
        for owed in self._owed:
            owed.cancel()
        self._owed_written.set()  # `_until_owed` sees the loss
        self._finish_if_done()

    # ---- lifetime --------------------------------------------------------------------------

    def close_when_idle(self) -> None:
        """Shutdown: end the connection now if no request is in hand and no response is owed,
        else right after the responses to the requests in hand (so an append is never answered
        half way)."""
        self._closing = True
        if not self._busy and not self._owed:
            self._close()

    def abort(self) -> None:
        """End the connection now, whatever is in hand."""
        # As Task.cancel does: the wait in hand ends in CancelledError inside the handler.
        if self._busy and (self._waiting_on is None or not self._waiting_on.cancel()):
            self._must_cancel = True
        if self._transport is not None:
            self._transport.abort()

    def wait_closed(self) -> asyncio.Future[None]:
        """Resolves once the peer is gone and no request is in hand."""
        return self._closed

    def _close(self) -> None:
        if self._owed_writer is not None:
            self._owed_writer.cancel()
        for owed in self._owed:
            owed.cancel()
        if self._transport is not None:
            self._transport.close()

    def _finish_if_done(self) -> None:
        if self._lost and not self._busy and not self._closed.done():
            self._closed.set_result(None)
            if self._on_closed is not None:
                self._on_closed(self)

    # ---- handling requests -----------------------------------------------------------------

    def _start(self) -> None:
        """Handle the queued requests now, in this callback."""
        self._busy = True
        self._must_cancel = False
        self._step(self._handle())

    def _step(self, handling: Coroutine[Any, Any, None], _: object = None) -> None:
        """Run `handling` until it waits, and resume it when what it waits on is done: what a
        task does for a coroutine, without creating one per request that waits (a fetch
        long-polling on every record of a consumer keeping up)."""
        self._waiting_on = None
        try:
            if self._must_cancel:
                self._must_cancel = False
                waiting_on = handling.throw(asyncio.CancelledError())
            else:
                waiting_on = handling.send(None)
        except StopIteration:
            return
        if waiting_on is None:  # a bare yield: asyncio.sleep(0)
            self._loop.call_soon(self._step, handling)
        else:
            waiting_on._asyncio_future_blocking = False  # taken, as a task takes it
            self._waiting_on = waiting_on
            waiting_on.add_done_callback(functools.partial(self._step, handling))

    async def _handle(self) -> None:
        """Handle every queued request, then close if asked to; errors end the connection."""
        try:
            await self._serve()
        except asyncio.CancelledError:  # `abort`
            self._close()
        except (ProtocolError, RegionShrank) as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self._close()
        except (ConnectionError, OSError) as e:
            log.debug("connection from %s ended: %s", self.peer, e)
            self._close()
        except Exception:
            log.exception("closing connection from %s: a request failed", self.peer)
            self._close()
        finally:
            self._busy = False
            if self._eof:
                self.close_when_idle()
            elif self._reading_paused and not self._lost and not self._closing:
                self._reading_paused = False
                assert self._transport is not None
                self._transport.resume_reading()
            self._finish_if_done()

    async def _serve(self) -> None:
        # Answers ready while more Produce requests are in hand are held and written with the
        # next ones, one send for many (a pipelining producer sends dozens at once).
        held: list[Part] = []
        frames = self._frames
        while frames:  # (the queue may grow at every await below)
            frame = frames.popleft()
            if isinstance(frame, ProtocolError):
                await self._flush(held)  # the requests before it are answered
                raise frame
            self._pending -= len(frame)
            if held and not _answered_at_once(frame):
                held = await self._flush(held)
            try:
                result = await self._respond(frame, self.peer)
            except Exception:
                await self._flush(held)
                raise
            if isinstance(result, Later):
                held = await self._flush(held)
                self._owe(asyncio.ensure_future(result.parts))
                await self._until_owed(MAX_OWED - 1)
            elif self._owed:  # answered already, but behind what is owed
                if result:
                    done: asyncio.Future[Sequence[Part] | None] = self._loop.create_future()
                    done.set_result(result)
                    self._owe(done)
            elif result:
                held.extend(result)
            if self._closing:
                await self._flush(held)
                await self._until_owed(0)
                self._close()
                return
            if not frames:  # requests that arrive while this write waits are handled next
                held = await self._flush(held)

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and not self._lost:
            self._reading_paused = True
            self._transport.pause_reading()

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
            self._owed_written.set()
            self.abort()
            return
        if self._closing and not self._busy:
            self._close()  # shutdown waited for these

    async def _until_owed(self, most: int) -> None:
        """Wait until at most `most` responses are owed."""
        while len(self._owed) > most:
            self._owed_written.clear()
            await self._owed_written.wait()
            if self._lost:
                raise ConnectionResetError("connection lost with responses owed")

    # ---- writing ---------------------------------------------------------------------------

    async def _write(self, parts: Sequence[Part]) -> None:
        transport = self._transport
        assert transport is not None
        for part in coalesced(parts):
            # A lost peer ends the response here, not after every remaining part is discarded
            # by the transport (which warns from the fifth write on).
            self._check_open()
            if isinstance(part, (bytes, bytearray, memoryview)):
                transport.write(part)
            elif part.size:
                await self._send_region(part)
        if self._writing_paused:
            await self._drain()

    async def _drain(self) -> None:
        """Wait until the transport takes writes again (its buffer below the low mark)."""
        self._check_open()
        if self._writing_paused:
            waiter = self._drain_waiter = self._loop.create_future()
            await waiter

    def _wake_drain(self, error: Exception | None) -> None:
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    async def _send_region(self, region: FileRegion) -> None:
        """os.sendfile where the transport can, else asyncio's read-and-write fallback."""
        await self._drain_fully()
        self._check_open()  # loop.sendfile raises RuntimeError on a closing transport
        assert self._transport is not None
        sent = await self._loop.sendfile(self._transport, RegionFile(region), region.position,
                                         region.size)
        if sent != region.size:
            raise RegionShrank(f"{region.size - sent} of {region.size} bytes of a fetched "
                               f"log range were gone (log truncated mid-response)")

    async def _drain_fully(self) -> None:
        """Wait until the transport holds no unsent bytes. asyncio's native sendfile would wait
        for them itself, and a peer lost during that wait makes it (3.11) resolve one future
        twice and log an InvalidStateError; waiting here, the loss raises ConnectionResetError."""
        transport = self._transport
        assert transport is not None
        if not transport.get_write_buffer_size():
            return
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0)  # paused until the buffer is empty
        try:
            await self._drain()
        finally:
            if not transport.is_closing():
                transport.set_write_buffer_limits(high=high, low=low)

    def _check_open(self) -> None:
        if self._lost or self._transport is None or self._transport.is_closing():
            raise ConnectionResetError("connection lost mid-response")

