"""One asyncio connection to a Kafka node for request/response calls (the broker forwarding an
admin request to the active controller, or registering and heartbeating with it).

Requests go one at a time (a lock), framed by the project's protocol codecs; a response is
checked against its request's correlation id. Any failure — refused, reset, a frame that does
not decode, a timeout — closes the connection and raises `ConnectionError`; the next call
connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.deadline import within
from spark_log.protocol import ProtocolError, decode_response, encode_request

_SIZE = struct.Struct(">i")
MAX_FRAME_BYTES = 64 << 20


class AsyncConnection:
    """Invariants: at most one request on the wire at a time; correlation ids never repeat on
    a connection. Not thread-safe: one event loop."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()
        self._correlation = 0

    async def call(self, request: RequestPayload, timeout_s: float) -> ResponsePayload:
        async with self._lock:
            try:
                return await within(timeout_s, self._call(request))
            except (OSError, asyncio.IncompleteReadError, ProtocolError, TimeoutError) as e:
                await self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e or type(e).__name__}") from e

    async def _call(self, request: RequestPayload) -> ResponsePayload:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        self._correlation += 1
        writer.write(encode_request(self._correlation, self.client_id, request))
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
        if not 0 < size <= MAX_FRAME_BYTES:
            raise ProtocolError(f"response frame of {size} bytes")
        frame = await reader.readexactly(size)
        correlation, response = decode_response(frame, request.__api_key__,
                                                request.__version__)
        if correlation != self._correlation:
            raise ProtocolError(f"response {correlation} to request {self._correlation}")
        return response

    async def close(self) -> None:
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
            with contextlib.suppress(OSError, ConnectionError):
                await streams[1].wait_closed()
