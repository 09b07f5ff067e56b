"""The listening socket and the client connections accepted on it (Kafka's SocketServer
acceptor): binding, accepting with TCP_NODELAY, counting open connections, and closing them at
shutdown after the requests in hand are answered.

Binding and serving are two steps, so the broker learns the bound address (`--port 0`) and
assembles what requests need before the first connection is accepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from spark_log.broker.server.connection import Connection, Part, Peer

Respond = Callable[[memoryview, Peer], Awaitable[Sequence[Part] | None]]


class Listener:
    """Invariant: an accepted connection is in `_connections` until its peer is gone and no
    request of it is in hand. Event-loop only."""

    def __init__(self, host: str, port: int, max_frame_bytes: int) -> None:
        self.host = host
        self.port = port
        self._max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._respond: Respond | None = None
        self._connections: set[Connection] = set()

    async def bind(self) -> tuple[str, int]:
        """Bind without accepting yet; returns the bound (host, port)."""
        self._server = await asyncio.get_running_loop().create_server(
            self._accept, self.host, self.port, reuse_address=True, start_serving=False)
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def serve(self, respond: Respond) -> None:
        """Accept connections; each answers its requests with `respond`."""
        assert self._server is not None, "bind() first"
        self._respond = respond
        await self._server.start_serving()

    @property
    def connection_count(self) -> int:
        """Client connections open now."""
        return len(self._connections)

    def close(self) -> None:
        """Stop accepting connections."""
        if self._server is not None:
            self._server.close()

    async def close_connections(self, grace_s: float) -> None:
        """End every connection once its request in hand is answered, waiting at most
        `grace_s` before cancelling the rest."""
        for connection in list(self._connections):
            connection.close_when_idle()
        if self._connections:
            await asyncio.wait([c.wait_closed() for c in self._connections], timeout=grace_s)
        for connection in list(self._connections):
            connection.abort()
        await asyncio.gather(*(c.wait_closed() for c in self._connections),
                             return_exceptions=True)

    def _accept(self) -> Connection:
        """A new connection's protocol (asyncio sets TCP_NODELAY on every TCP socket)."""
        assert self._respond is not None
        connection = Connection(self._respond, self._max_frame_bytes,
                                on_closed=self._connections.discard)
        self._connections.add(connection)
        return connection
