"""The network between the quorum's replicas: one asyncio connection from this replica to each
other voter (addresses from `controller.quorum.voters`, `id@host:port`), carrying raft's
requests in Kafka's framing (`spark_log.protocol`: size prefix, request header with a client id
naming the node) and bringing each response back to raft as a `Message`, matched by its
correlation id.

`send` never blocks and never fails: a request waits in its peer's queue while the connection
is being made, and is dropped when the peer cannot be reached (raft sends again when its
request times out). A response that raft cannot take (a top-level error such as
INCONSISTENT_CLUSTER_ID) is dropped with a log line. A lost connection is made again on the next
request, after a backoff that doubles up to `max_backoff_ms` while the peer stays down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from spark_log.deadline import within
from spark_log.protocol import ProtocolError, decode_entity, encode_request
from spark_log.protocol.response_header import parse_response_header
from spark_log.raft.messages import Message

from . import raft_codec

log = logging.getLogger(__name__)

MAX_QUEUED = 256  # requests held for one peer while it is being connected; the oldest go first
MAX_FRAME_BYTES = 128 << 20
_SIZE = struct.Struct(">i")


class Address(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class _InFlight:
    message: Message  # the raft request
    api_key: int
    version: int
    sent_at: float


class QuorumChannel:
    """Connections to the other voters. Invariants: at most one connection per peer; every
    request written is in its peer's in-flight table until answered or the connection ends;
    wire correlation ids are unique for the channel's life. Not thread-safe: one event loop."""

    def __init__(self, node_id: int, addresses: Mapping[int, Address], cluster_id: str,
                 on_response: Callable[[Message], None], *, request_timeout_ms: int,
                 backoff_ms: int = 50, max_backoff_ms: int = 1000) -> None:
        self.node_id, self.cluster_id = node_id, cluster_id
        self.client_id = f"raft-client-{node_id}"  # Kafka's name for a replica's client
        self.on_response = on_response
        self.request_timeout_s = request_timeout_ms / 1000
        self.backoff_s, self.max_backoff_s = backoff_ms / 1000, max_backoff_ms / 1000
        self._correlation = 0
        self._peers = {peer: _Peer(self, peer, address) for peer, address in addresses.items()
                       if peer != node_id}
        self._closed = False

    def send(self, message: Message) -> None:
        """Queue a raft request for its destination (dropped if that replica is unknown)."""
        peer = self._peers.get(message.destination)
        if peer is None or self._closed:
            log.debug("dropping %s: no address for replica %d", message, message.destination)
            return
        peer.enqueue(message)

    def next_correlation_id(self) -> int:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return self._correlation

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every queued request was written and answered (or its connection lost);
        False if `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        while any(p.busy for p in self._peers.values()):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.005)
        return True

    async def close(self) -> None:
        """Close every connection; queued and in-flight requests are dropped."""
        self._closed = True
        for peer in self._peers.values():
            await peer.close()


class _Peer:
    """The connection to one voter and the requests queued for it."""

    def __init__(self, channel: QuorumChannel, peer_id: int, address: Address) -> None:
        self.channel, self.peer_id, self.address = channel, peer_id, address
        self._queue: deque[Message] = deque()
        self._in_flight: dict[int, _InFlight] = {}
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._in_flight)

    def enqueue(self, message: Message) -> None:
        if len(self._queue) >= MAX_QUEUED:
            self._queue.popleft()
        self._queue.append(message)
        self._wanted.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"raft-{self.channel.node_id}-to-{self.peer_id}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._queue.clear()
        self._in_flight.clear()

    async def _run(self) -> None:
        backoff = self.channel.backoff_s
        while True:
            if not self._queue:
                self._wanted.clear()
            await self._wanted.wait()
            try:
                reader, writer = await within(self.channel.request_timeout_s,
                                              asyncio.open_connection(self.address.host,
                                                                      self.address.port))
            except OSError as e:  # TimeoutError included
                log.debug("replica %d cannot reach replica %d at %s: %s; dropping %d request(s)",
                          self.channel.node_id, self.peer_id, self.address, e, len(self._queue))
                self._queue.clear()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.channel.max_backoff_s)
                continue
            backoff = self.channel.backoff_s
            await self._connected(reader, writer)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                         ) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reading = asyncio.get_running_loop().create_task(self._read(reader))
        try:
            await self._write(writer, reading)
        except (OSError, ProtocolError, asyncio.IncompleteReadError) as e:
            log.debug("connection from replica %d to replica %d at %s ended: %s",
                      self.channel.node_id, self.peer_id, self.address, e)
        except Exception:  # a bug: this connection goes, the next request makes another
            log.exception("connection from replica %d to replica %d at %s failed",
                          self.channel.node_id, self.peer_id, self.address)
        finally:
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading
            writer.close()
            self._in_flight.clear()

    async def _write(self, writer: asyncio.StreamWriter, reading: asyncio.Task[None]) -> None:
        while not reading.done():
            while self._queue:
                writer.write(self._frame(self._queue.popleft()))
            await writer.drain()
            self._wanted.clear()
            waiting = asyncio.get_running_loop().create_task(self._wanted.wait())
            await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
        reading.result()  # the reader's error, or EOF as IncompleteReadError

    def _frame(self, message: Message) -> bytes:
        channel = self.channel
        request = raft_codec.encode_request(message.body, self.peer_id, channel.cluster_id)
        correlation = channel.next_correlation_id()
        now = time.monotonic()
        stale = now - 4 * channel.request_timeout_s  # answers that will never come
        for key in [k for k, f in self._in_flight.items() if f.sent_at < stale]:
            del self._in_flight[key]
        self._in_flight[correlation] = _InFlight(message, request.__api_key__,
                                                 request.__version__, now)
        return encode_request(correlation, channel.client_id, request)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
            if not 0 < size <= MAX_FRAME_BYTES:
                raise ProtocolError(f"response frame of {size} bytes")
            frame = await reader.readexactly(size)
            correlation = _SIZE.unpack_from(frame)[0]
            sent = self._in_flight.pop(correlation, None)
            if sent is not None:
                self._answer(sent, frame)

    def _answer(self, sent: _InFlight, frame: bytes) -> None:
        try:
            _, body = parse_response_header(frame, sent.api_key, sent.version)
            entity = decode_entity(raft_codec.response_type(sent.api_key, sent.version), body)
            response = raft_codec.decode_response(entity)  # type: ignore[arg-type]
        except (ProtocolError, raft_codec.QuorumWireError) as e:
            log.warning("replica %d dropped an answer of replica %d at %s: %s",
                        self.channel.node_id, self.peer_id, self.address, e)
            return
        request = sent.message
        self.channel.on_response(Message(self.peer_id, request.source, request.correlation_id,
                                          response))
