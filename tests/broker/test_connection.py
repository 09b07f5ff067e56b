"""A client that goes away in the middle of a response ends only its own connection, quietly, and
file regions reach clients byte-exact on both of asyncio's sendfile paths: native os.sendfile
(plain TCP) and the read-and-write fallback (TLS transports never have a native sendfile). A
region cut short on disk closes the connection rather than sending a frame shorter than its size.

The broker-process test drives the real broker; the others run `Connection` in-process behind an
asyncio server, answering every request with a few bytes and a region of a real segment file.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from spark_log.broker.server.connection import Connection, Peer
from spark_log.broker.server.response_parts import SMALL_REGION_BYTES, Part
from spark_log.protocol import ErrorCode, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build
from spark_log.records import Record, build_batch
from spark_log.storage import DEFAULT_CONFIG, FetchSlice, PartitionLog
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

DEADLINE_S = 30.0
VALUE = bytes(range(256)) * 400  # ~100 KB per record
PARTITIONS = 8
BATCHES_PER_PARTITION = 2
RECORDS_PER_BATCH = 6  # ~600 KB batches, under message.max.bytes
SMALL_RCVBUF = 4096  # the peer's window stays tiny, so the broker blocks mid-send
RESETS = 8


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def big_batch(seed: int) -> bytes:
    return build_batch([Record(i, int(time.time() * 1000), b"%d" % seed, VALUE)
                        for i in range(RECORDS_PER_BATCH)])


def reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: an RST, so the sender's next write fails at once."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# ---- the broker process ---------------------------------------------------------------------

def fill_topic(broker: BrokerProcess, topic: str) -> None:
    with RawClient(broker.bootstrap) as client:
        created = client.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": topic, "num_partitions": PARTITIONS, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 10_000, "validate_only": False})
        assert created.topics[0].error_code == ErrorCode.none, created
        for partition in range(PARTITIONS):
            for n in range(BATCHES_PER_PARTITION):
                produced = client.request(ApiKey.PRODUCE, 9, {
                    "transactional_id": None, "acks": 1, "timeout": 10_000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": partition, "records": big_batch(n)}]}]})
                answer = produced.responses[0].partition_responses[0]
                assert answer.error_code == ErrorCode.none, answer


def fetch_everything(topic: str) -> bytes:
    """A Fetch v11 frame asking for every partition from offset 0, with room for all of it."""
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 28,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 26}
                for p in range(PARTITIONS)]}]}
    spec = spec_for(ApiKey.FETCH)
    assert spec is not None
    return encode_request(1, "gone-mid-response", build(spec.request_type(11), body))


def fetch_and_leave(broker: BrokerProcess, request: bytes, *, read_first: bool) -> None:
    """Send `request` and go away: after the first bytes of the response arrive, with an RST
    (the broker is mid-send), or at once, with a plain close (the broker's first write draws
    the RST on loopback, so its first os.sendfile fails and asyncio falls back to reading the
    file itself)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
    sock.settimeout(DEADLINE_S)
    sock.connect((broker.host, broker.port))
    sock.sendall(request)
    if not read_first:
        sock.close()
        return
    try:
        assert sock.recv(100), "the broker closed the connection before answering"
    finally:
        reset(sock)


def produce_and_consume(broker: BrokerProcess, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_clients_gone_mid_fetch_leave_no_error_and_the_broker_keeps_serving(
        broker: BrokerProcess) -> None:
    topic = unique("big")
    fill_topic(broker, topic)
    request = fetch_everything(topic)
    for _ in range(RESETS):
        fetch_and_leave(broker, request, read_first=True)
        fetch_and_leave(broker, request, read_first=False)

    other = unique("after")
    values = [b"one", b"two", b"three"]
    assert produce_and_consume(broker, other, values) == values

    assert broker.stop() == 0  # a clean exit, with every log line written
    log = broker.log()
    for sign in ("ERROR", "Traceback", "Exception", "exception", "never retrieved", "Unhandled"):
        assert sign not in log, log


# ---- Connection in-process, plain TCP and TLS -----------------------------------------------

HEAD = b"head"
REQUEST = struct.pack(">i", 4) + b"ping"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost: (cert.pem, key.pem)."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture(params=["tcp", "tls"])
def contexts(request: pytest.FixtureRequest, certificate: tuple[Path, Path]
             ) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(server, client) TLS contexts, or (None, None) for plain TCP."""
    if request.param == "tcp":
        return None, None
    cert, key = certificate
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


@pytest.fixture
def partition_log(tmp_path: Path) -> Iterator[PartitionLog]:
    """A real partition log holding several MB in one segment."""
    log = PartitionLog(str(tmp_path), "t", 0, DEFAULT_CONFIG)
    for n in range(6):
        log.append(big_batch(n), leader_epoch=0)
    yield log
    log.close()


def segment_bytes(log: PartitionLog, region: FetchSlice) -> bytes:
    """What the segment file on disk holds of `region` now."""
    (path,) = Path(log.dir).glob("*.log")
    return path.read_bytes()[region.position:region.position + region.size]


class RegionServer:
    """`Connection` behind an asyncio server: every request frame gets the frame HEAD + `lead` +
    region, sent from a socket whose kernel send buffer is `sndbuf` bytes (0: the default).
    Tracks each connection, so a test can await the end of a connection it broke; all have
    ended when `running` exits (one still closing would be cut with the loop)."""

    def __init__(self, region: FetchSlice, context: ssl.SSLContext | None, *,
                 lead: bytes = b"", sndbuf: int = 0) -> None:
        self.region = region
        self.context = context
        self.lead = lead
        self.sndbuf = sndbuf
        self.connections: list[Connection] = []
        self.port = 0

    async def _respond(self, frame: memoryview, peer: Peer) -> list[Part]:
        size = len(HEAD) + len(self.lead) + self.region.size
        return [struct.pack(">i", size) + HEAD + self.lead, self.region]

    def _accept(self) -> Connection:
        connection = _SizedConnection(self._respond, 1 << 20, sndbuf=self.sndbuf)
        self.connections.append(connection)
        return connection

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[RegionServer]:
        server = await asyncio.get_running_loop().create_server(
            self._accept, "127.0.0.1", 0, ssl=self.context)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await self.all_ended()
            await server.wait_closed()

    async def all_ended(self) -> None:
        await asyncio.wait_for(asyncio.gather(*(c.wait_closed() for c in self.connections)),
                               DEADLINE_S)


class _SizedConnection(Connection):
    """A Connection whose socket's kernel send buffer is `sndbuf` bytes (0: the default)."""

    def __init__(self, *args: Any, sndbuf: int) -> None:
        super().__init__(*args)
        self._sndbuf = sndbuf

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._sndbuf:
            transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
        super().connection_made(transport)


async def connect(port: int, context: ssl.SSLContext | None, rcvbuf: int = 0
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.wait_for(asyncio.open_connection(
        sock=sock, ssl=context, server_hostname="localhost" if context else None), DEADLINE_S)


async def fetch_whole(port: int, context: ssl.SSLContext | None, times: int = 1) -> list[bytes]:
    """`times` responses on one connection, each read in full (after its size prefix)."""
    reader, writer = await connect(port, context)
    bodies = []
    try:
        for _ in range(times):
            writer.write(REQUEST)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            bodies.append(await asyncio.wait_for(reader.readexactly(size), DEADLINE_S))
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
    return bodies


async def fetch_and_reset(port: int, context: ssl.SSLContext | None) -> None:
    """Ask for the region, take a few bytes of it through a tiny window, then reset."""
    reader, writer = await connect(port, context, rcvbuf=SMALL_RCVBUF)
    writer.write(REQUEST)
    await asyncio.wait_for(reader.readexactly(4 + len(HEAD) + 100), DEADLINE_S)
    writer.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def fetch_until_closed(port: int, context: ssl.SSLContext | None) -> tuple[int, bytes]:
    """(announced size, every byte after the prefix until the server closed)."""
    reader, writer = await connect(port, context)
    writer.write(REQUEST)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    body = await asyncio.wait_for(reader.read(), DEADLINE_S)  # to EOF: closed by the server
    writer.close()
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        await writer.wait_closed()
    return size, body


def problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records a quiet end must not produce: errors, tracebacks, the reported AttributeError."""
    gc.collect()  # an exception stored in a dropped future is only reported when collected
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR or r.exc_info or "AttributeError" in r.getMessage()]


def test_a_region_arrives_byte_exact(partition_log: PartitionLog, contexts) -> None:
    region = partition_log.read(0, 1 << 30)
    expected = HEAD + segment_bytes(partition_log, region)
    assert region.size > 3_000_000

    async def scenario() -> list[bytes]:
        async with RegionServer(region, contexts[0]).running() as server:
            return await fetch_whole(server.port, contexts[1], times=2)

    assert asyncio.run(scenario()) == [expected, expected]


def ended_quietly(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The connection's own lines saying a peer went away."""
    return [r for r in caplog.records if r.name == "spark_log.broker.server.connection"
            and "ended" in r.getMessage() and r.levelno == logging.DEBUG]


def test_a_client_reset_mid_send_ends_only_its_connection_quietly(
        partition_log: PartitionLog, contexts, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    region = partition_log.read(0, 1 << 30)
    expected = HEAD + segment_bytes(partition_log, region)

    async def scenario() -> list[bytes]:
        async with RegionServer(region, contexts[0]).running() as server:
            for _ in range(3):
                await fetch_and_reset(server.port, contexts[1])
            await server.all_ended()
            return await fetch_whole(server.port, contexts[1])

    assert asyncio.run(scenario()) == [expected]
    assert problems(caplog) == []
    assert len(ended_quietly(caplog)) == 3, caplog.text


def test_a_client_reset_while_bytes_before_a_region_wait_unsent_ends_quietly(
        partition_log: PartitionLog, contexts, caplog: pytest.LogCaptureFixture) -> None:
    # 40 KB of bytes ahead of the region, under the transport's high-water mark, against 4 KB
    # kernel buffers: most of them still wait in the transport when the region's turn comes.
    caplog.set_level(logging.DEBUG)
    region = partition_log.read(0, 1 << 30)
    lead = bytes(range(256)) * 160

    async def scenario() -> None:
        async with RegionServer(region, contexts[0], lead=lead, sndbuf=4096).running() as server:
            for _ in range(3):
                await fetch_and_reset(server.port, contexts[1])

    asyncio.run(scenario())
    assert problems(caplog) == []
    assert len(ended_quietly(caplog)) == 3, caplog.text


def test_a_region_cut_short_on_disk_closes_the_connection(
        partition_log: PartitionLog, contexts, caplog: pytest.LogCaptureFixture) -> None:
    region = partition_log.read(0, 1 << 30)
    partition_log.truncate_to(RECORDS_PER_BATCH * 2)  # two of six batches remain
    left = segment_bytes(partition_log, region)
    assert 0 < len(left) < region.size

    async def scenario() -> tuple[int, bytes]:
        async with RegionServer(region, contexts[0]).running() as server:
            return await fetch_until_closed(server.port, contexts[1])

    size, body = asyncio.run(scenario())
    assert size == len(HEAD) + region.size
    assert body == HEAD + left  # what the disk still had, then the close: no garbage
    assert problems(caplog) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("truncated" in w for w in warnings), warnings


@pytest.fixture
def small_log(tmp_path: Path) -> Iterator[PartitionLog]:
    """A partition log of a few small batches: reads of it are under SMALL_REGION_BYTES, so
    they are copied into the response rather than sent with sendfile."""
    log = PartitionLog(str(tmp_path), "t", 0, DEFAULT_CONFIG)
    for n in range(4):
        log.append(build_batch([Record(0, int(time.time() * 1000), b"k", b"%d" % n * 500)]),
                   leader_epoch=0)
    yield log
    log.close()


def test_a_small_region_arrives_byte_exact(small_log: PartitionLog, contexts) -> None:
    region = small_log.read(0, 1 << 30)
    assert 0 < region.size <= SMALL_REGION_BYTES
    expected = HEAD + segment_bytes(small_log, region)

    async def scenario() -> list[bytes]:
        async with RegionServer(region, contexts[0]).running() as server:
            return await fetch_whole(server.port, contexts[1], times=2)

    assert asyncio.run(scenario()) == [expected, expected]


def test_a_small_region_cut_short_closes_the_connection_before_its_frame(
        small_log: PartitionLog, contexts, caplog: pytest.LogCaptureFixture) -> None:
    region = small_log.read(0, 1 << 30)
    small_log.truncate_to(2)

    async def scenario() -> bytes:
        async with RegionServer(region, contexts[0]).running() as server:
            reader, writer = await connect(server.port, contexts[1])
            writer.write(REQUEST)
            got = await asyncio.wait_for(reader.read(), DEADLINE_S)  # to EOF
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
            return got

    assert asyncio.run(scenario()) == b""  # no frame at all rather than a short one
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("truncated" in w for w in warnings), warnings
