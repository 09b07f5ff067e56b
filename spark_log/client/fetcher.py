"""A small blocking Kafka client that fetches raw record batches of one partition.

It speaks the standard protocol (Metadata v1 to find the partition leader, Fetch v4 with the
isolation level) over plaintext, so it works with any Kafka broker, and hands back the
record-batch bytes undecoded: the caller decodes whole batches (see
`spark_log.datasource.columnar`). Requests are built by the project's protocol codecs; the Fetch
response is read by hand, so the records stay a view of the received frame (no copies of
megabytes per fetch). One fetch may be sent ahead while the previous answer is decoded
(`send_fetch` / `receive`): the broker prepares the next answer meanwhile. It deliberately
handles only the common case; every error code, redirect or protocol surprise raises
`FetchUnavailable` so the caller can continue with a full Kafka client instead.
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from spark_log.protocol import decode_response, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

CLIENT_ID = "pylog-fetcher"
METADATA_VERSION = 1
FETCH_VERSION = 4
MAX_FETCH_BYTES = 16 << 20
_LARGE_FRAME = 1 << 20
_SIZE = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqqi")  # index, error, high watermark, LSO, aborted count
_I16 = struct.Struct(">h")


class FetchUnavailable(Exception):
    """The fast path cannot serve this fetch; use a full client from the same offset."""


@dataclass(frozen=True)
class FetchResult:
    """One partition's answer. `records` holds whole and possibly one partial trailing batch
    (a read-only view of the response frame)."""

    records: memoryview
    high_watermark: int
    last_stable_offset: int
    has_aborted: bool


class _Connection:
    """One blocking socket to one broker; responses come in request order and are matched to
    their requests by correlation id."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise FetchUnavailable(f"cannot connect to {host}:{port}: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        spec = spec_for(api_key)
        assert spec is not None
        self._correlation += 1
        try:
            self.sock.sendall(encode_request(self._correlation, CLIENT_ID,
                                             build(spec.request_type(version), body)))
        except OSError as e:
            raise FetchUnavailable(f"request failed: {e}") from None
        return self._correlation

    def receive(self, correlation: int) -> memoryview:
        """The next response frame (after its correlation id), which must answer
        `correlation`."""
        try:
            size = _SIZE.unpack(self._read(4))[0]
            frame = self._read_into(memoryview(_frame_buffer(size))).toreadonly()
        except OSError as e:
            raise FetchUnavailable(f"request failed: {e}") from None
        if size < 4 or _SIZE.unpack_from(frame)[0] != correlation:
            raise FetchUnavailable("response out of order")
        return frame[4:]

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation = self.send(api_key, version, body)
        try:
            size = _SIZE.unpack(self._read(4))[0]
            got, response = decode_response(memoryview(bytes(self._read(size))), api_key,
                                            version)
        except (OSError, ValueError, KeyError) as e:
            raise FetchUnavailable(f"request failed: {e}") from None
        if got != correlation:
            raise FetchUnavailable("response out of order")
        return response

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        self._read_into(memoryview(buf))
        return buf

    def _read_into(self, view: memoryview) -> memoryview:
        """Fills `view` from the socket; returns it."""
        got, n = 0, len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise OSError("connection closed by the broker")
            got += k
        return view

    def close(self) -> None:
        self.sock.close()


def _frame_buffer(size: int) -> bytearray | np.ndarray:
    """Room for a response frame of `size` bytes. A large one is a numpy array, left unfilled:
    numpy asks for huge pages for megabytes, where bytearray(size) first clears them 4 KiB at
    a time (and the kernel faults each in): that was most of a Spark worker's page faults while
    pylog read a topic."""
    return np.empty(size, np.uint8) if size >= _LARGE_FRAME else bytearray(size)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


class PartitionFetcher:
    """Fetches one partition from its leader. Not thread-safe; close() it."""

    def __init__(self, bootstrap: str, topic: str, partition: int, *, read_committed: bool,
                 timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.partition = partition
        self.isolation = 1 if read_committed else 0
        self.timeout_s = timeout_s
        self._conn = self._connect_to_leader(bootstrap)
        self._pending: deque[int] = deque()

    @property
    def in_flight(self) -> int:
        """Fetches sent whose answers were not received yet."""
        return len(self._pending)

    def _connect_to_leader(self, bootstrap: str) -> _Connection:
        first = bootstrap.split(",")[0]
        conn = _Connection(*_split(first), self.timeout_s)
        try:
            meta = conn.request(ApiKey.METADATA, METADATA_VERSION,
                                {"topics": [{"name": self.topic}]})
        except FetchUnavailable:
            conn.close()
            raise
        leader = self._leader(meta)
        broker = next((b for b in meta.brokers if b.node_id == leader), None)
        if broker is None:
            conn.close()
            raise FetchUnavailable(f"leader {leader} of {self.topic}-{self.partition} unknown")
        if (broker.host, broker.port) == _split(first):
            return conn
        conn.close()
        return _Connection(broker.host, broker.port, self.timeout_s)

    def _leader(self, meta: Any) -> int:
        for topic in meta.topics:
            if topic.name == self.topic and int(topic.error_code) == 0:
                for p in topic.partitions:
                    if p.partition_index == self.partition and int(p.error_code) == 0:
                        return int(p.leader_id)
        raise FetchUnavailable(f"no leader for {self.topic}-{self.partition}")

    def fetch(self, offset: int, max_bytes: int = MAX_FETCH_BYTES,
              max_wait_ms: int = 100) -> FetchResult:
        self.send_fetch(offset, max_bytes, max_wait_ms)
        return self.receive()

    def send_fetch(self, offset: int, max_bytes: int = MAX_FETCH_BYTES,
                   max_wait_ms: int = 100) -> None:
        """Ask for records from `offset`; `receive` returns the answers in order."""
        self._pending.append(self._conn.send(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait": dt.timedelta(milliseconds=max_wait_ms),
            "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": self.isolation,
            "topics": [{"topic": self.topic, "partitions": [{
                "partition": self.partition, "fetch_offset": offset,
                "partition_max_bytes": max_bytes}]}]}))

    def receive(self) -> FetchResult:
        """The answer to the oldest fetch sent."""
        frame = self._conn.receive(self._pending.popleft())
        try:
            return read_fetch_response(frame, self.topic, self.partition)
        except (struct.error, IndexError):
            raise FetchUnavailable("malformed fetch response") from None

    def close(self) -> None:
        self._conn.close()


def read_fetch_response(body: memoryview, topic: str, partition: int) -> FetchResult:
    """The partition's part of a Fetch v4 response body (after the correlation id)."""
    pos = 4  # throttle_time_ms
    (topics,) = _SIZE.unpack_from(body, pos)
    pos += 4
    name = topic.encode()
    for _ in range(topics):
        (length,) = _I16.unpack_from(body, pos)
        this_topic = body[pos + 2:pos + 2 + length] == name
        pos += 2 + max(length, 0)
        (count,) = _SIZE.unpack_from(body, pos)
        pos += 4
        for _ in range(count):
            index, error, high, stable, aborted = _PARTITION_HEAD.unpack_from(body, pos)
            pos += _PARTITION_HEAD.size + 16 * max(aborted, 0)
            (size,) = _SIZE.unpack_from(body, pos)
            pos += 4
            records = body[pos:pos + max(size, 0)]
            if len(records) != max(size, 0):
                raise FetchUnavailable("malformed fetch response")
            pos += max(size, 0)
            if this_topic and index == partition:
                if error != 0:
                    raise FetchUnavailable(f"fetch error {error}")
                return FetchResult(records, high, stable, aborted > 0)
    raise FetchUnavailable("partition missing from the fetch response")
