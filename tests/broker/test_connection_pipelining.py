"""A connection's answers to requests that arrive together: Produce answers are written in one
send, a slow request behind them never holds them back, and a bad frame behind them closes the
connection only after they are answered. Requests behind one that waits are answered after it,
in order, and reading pauses while too many wait; a client that half-closes gets its answers;
a request that fails unexpectedly closes only its own connection. `Connection` runs in-process
behind an asyncio server whose `respond` answers each frame with its own correlation id."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from typing import Any

from spark_log.broker.server.connection import Connection, Part, Peer
from spark_log.protocol import ProtocolError
from tests.controller.support import eventually

DEADLINE_S = 10.0
PRODUCE, FETCH, BAD, BROKEN, BIG = 0, 1, 99, 98, 97
BIG_BYTES = 8 << 20  # more than the socket buffers hold: the write waits for the reader


def frame(api_key: int, correlation_id: int) -> bytes:
    body = struct.pack(">hhi", api_key, 0, correlation_id)
    return struct.pack(">i", len(body)) + body


class CountingTransport:
    """A transport that counts write calls (each is one send on an idle socket)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.writes = 0

    def write(self, data: Any) -> None:
        self.writes += 1
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CountingConnection(Connection):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.counting = CountingTransport(transport)  # type: ignore[arg-type]
        self.eof_seen = asyncio.Event()
        super().connection_made(self.counting)  # type: ignore[arg-type]

    def eof_received(self) -> bool:
        self.eof_seen.set()
        return super().eof_received()


class Server:
    def __init__(self) -> None:
        self.fetch_may_answer = asyncio.Event()
        self.fetch_waits = asyncio.Event()  # a FETCH is in hand, waiting for the one above
        self.connections: list[CountingConnection] = []
        self.port = 0

    async def respond(self, request: memoryview, peer: Peer) -> list[Part]:
        api_key, _, correlation_id = struct.unpack_from(">hhi", request)
        if api_key == BAD:
            raise ProtocolError("a bad frame")
        if api_key == BROKEN:
            raise KeyError("a handler's bug")
        if api_key == FETCH:
            self.fetch_waits.set()
            await self.fetch_may_answer.wait()
        if api_key == BIG:
            body = struct.pack(">hhi", api_key, 0, correlation_id) + bytes(BIG_BYTES)
            return [struct.pack(">i", len(body)) + body]
        return [frame(api_key, correlation_id)]

    def _accept(self) -> Connection:
        connection = CountingConnection(self.respond, 1 << 20)
        self.connections.append(connection)
        return connection

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        server = await asyncio.get_running_loop().create_server(self._accept, "127.0.0.1", 0)
        self.port = port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            yield reader, writer
        finally:
            writer.close()
            await asyncio.wait_for(
                asyncio.gather(*(c.wait_closed() for c in self.connections)), DEADLINE_S)
            server.close()
            await server.wait_closed()


async def answer(reader: asyncio.StreamReader) -> tuple[int, int]:
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE_S))[0]
    api_key, _, correlation_id = struct.unpack(">hhi", await reader.readexactly(size))
    return api_key, correlation_id


def test_produce_answers_that_arrive_together_go_out_in_one_send() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(b"".join(frame(PRODUCE, n) for n in range(20)))
            got = [await answer(reader) for _ in range(20)]
            assert got == [(PRODUCE, n) for n in range(20)]
            assert server.connections[0].counting.writes == 1
    asyncio.run(scenario())


def test_a_slow_request_behind_produce_answers_does_not_hold_them_back() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(PRODUCE, 1) + frame(PRODUCE, 2) + frame(FETCH, 3))
            # the fetch answers only once both produce answers have arrived
            assert [await answer(reader), await answer(reader)] == [(PRODUCE, 1), (PRODUCE, 2)]
            server.fetch_may_answer.set()
            assert await answer(reader) == (FETCH, 3)
    asyncio.run(scenario())


def test_a_bad_frame_closes_the_connection_after_the_answers_before_it() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(PRODUCE, 1) + frame(PRODUCE, 2) + frame(BAD, 3)
                         + frame(PRODUCE, 4))
            assert [await answer(reader), await answer(reader)] == [(PRODUCE, 1), (PRODUCE, 2)]
            assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""  # closed
    asyncio.run(scenario())


def test_requests_behind_one_that_waits_are_answered_after_it_in_order() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(FETCH, 1))
            await asyncio.wait_for(server.fetch_waits.wait(), DEADLINE_S)
            writer.write(b"".join(frame(PRODUCE, n) for n in range(2, 6)))
            await writer.drain()
            server.fetch_may_answer.set()
            assert [await answer(reader) for _ in range(5)] == \
                [(FETCH, 1)] + [(PRODUCE, n) for n in range(2, 6)]
    asyncio.run(scenario())


def test_reading_pauses_while_many_requests_wait_and_resumes_after() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(FETCH, 0))
            padding = b"x" * 1000
            many = [struct.pack(">ihhi", 8 + len(padding), PRODUCE, 0, n) + padding
                    for n in range(1, 400)]  # 400 KB behind the waiting fetch
            writer.write(b"".join(many))
            transport = server.connections[0].counting
            await eventually(lambda: not transport.is_reading(), DEADLINE_S, "reading paused")
            server.fetch_may_answer.set()
            got = [await answer(reader) for _ in range(400)]
            assert got == [(FETCH, 0)] + [(PRODUCE, n) for n in range(1, 400)]
            assert transport.is_reading()
    asyncio.run(scenario())


def test_a_client_that_half_closes_gets_its_answers_then_the_close() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(PRODUCE, 1) + frame(FETCH, 2))
            assert await answer(reader) == (PRODUCE, 1)  # the fetch waits now
            writer.write_eof()
            await asyncio.wait_for(server.connections[0].eof_seen.wait(), DEADLINE_S)
            server.fetch_may_answer.set()
            assert await answer(reader) == (FETCH, 2)
            assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
    asyncio.run(scenario())


def test_a_request_that_fails_unexpectedly_closes_only_its_connection(caplog) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            other_reader, other_writer = await asyncio.open_connection(
                "127.0.0.1", server.port)
            writer.write(frame(PRODUCE, 1) + frame(BROKEN, 2) + frame(PRODUCE, 3))
            assert await answer(reader) == (PRODUCE, 1)
            assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
            other_writer.write(frame(PRODUCE, 4))
            assert await answer(other_reader) == (PRODUCE, 4)
            other_writer.close()
    asyncio.run(scenario())
    assert "a request failed" in caplog.text and "a handler's bug" in caplog.text


def test_an_abort_while_a_request_waits_cancels_the_wait_and_ends_the_connection() -> None:
    async def scenario() -> None:
        server = Server()
        cancelled = asyncio.Event()

        async def respond(request: memoryview, peer: Peer) -> list[Part]:
            try:
                return await Server.respond(server, request, peer)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        server.respond = respond  # type: ignore[method-assign]
        async with server.running() as (reader, writer):
            writer.write(frame(PRODUCE, 1) + frame(FETCH, 2))
            assert await answer(reader) == (PRODUCE, 1)  # the fetch waits now
            server.connections[0].abort()
            await asyncio.wait_for(cancelled.wait(), DEADLINE_S)
            await asyncio.wait_for(server.connections[0].wait_closed(), DEADLINE_S)
            assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
    asyncio.run(scenario())


def test_a_request_that_arrives_while_an_answer_waits_to_be_sent_is_answered() -> None:
    async def scenario() -> None:
        server = Server()
        async with server.running() as (reader, writer):
            writer.write(frame(BIG, 1))
            await writer.drain()
            await eventually(  # the big answer's write waits for this reader
                lambda: server.connections and
                server.connections[0].counting.get_write_buffer_size(),
                DEADLINE_S, "an answer waiting to be sent")
            writer.write(frame(PRODUCE, 2))
            await writer.drain()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            big = await asyncio.wait_for(reader.readexactly(size), DEADLINE_S)
            assert struct.unpack_from(">hhi", big) == (BIG, 0, 1)
            assert await answer(reader) == (PRODUCE, 2)
    asyncio.run(scenario())
