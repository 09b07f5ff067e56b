"""A small blocking Kafka client that fetches raw record batches of one partition.

It speaks the standard protocol (Metadata v1 to find the partition leader, Fetch v4 with the
isolation level) over plaintext, through the project's protocol codecs, so it works with any
Kafka broker, and hands back the record-batch bytes undecoded: the caller decodes whole batches
(see `spark_log.datasource.columnar`). It deliberately handles only the common case; every
error code, redirect or protocol surprise raises `FetchUnavailable` so the caller can continue
with a full Kafka client instead.
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
from dataclasses import dataclass
from typing import Any

from spark_log.protocol import decode_response, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

CLIENT_ID = "pylog-fetcher"
METADATA_VERSION = 1
FETCH_VERSION = 4
_SIZE = struct.Struct(">i")


class FetchUnavailable(Exception):
    """The fast path cannot serve this fetch; use a full client from the same offset."""


@dataclass(frozen=True)
class FetchResult:
    """One partition's answer. `records` holds whole and possibly one partial trailing batch."""

    records: bytes
    high_watermark: int
    last_stable_offset: int
    has_aborted: bool


class _Connection:
    """One blocking socket to one broker; requests are sent one at a time (correlation ids
    checked), so responses always match their request."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise FetchUnavailable(f"cannot connect to {host}:{port}: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        spec = spec_for(api_key)
        assert spec is not None
        self._correlation += 1
        try:
            self.sock.sendall(encode_request(self._correlation, CLIENT_ID,
                                             build(spec.request_type(version), body)))
            size = _SIZE.unpack(self._read(4))[0]
            correlation, response = decode_response(memoryview(bytes(self._read(size))), api_key,
                                                    version)
        except (OSError, ValueError, KeyError) as e:
            raise FetchUnavailable(f"request failed: {e}") from None
        if correlation != self._correlation:
            raise FetchUnavailable("response out of order")
        return response

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise OSError("connection closed by the broker")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()


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

    def fetch(self, offset: int, max_bytes: int = 4 << 20, max_wait_ms: int = 100) -> FetchResult:
        response = self._conn.request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait": dt.timedelta(milliseconds=max_wait_ms),
            "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": self.isolation,
            "topics": [{"topic": self.topic, "partitions": [{
                "partition": self.partition, "fetch_offset": offset,
                "partition_max_bytes": max_bytes}]}]})
        for topic in response.responses:
            for p in topic.partitions:
                if p.partition_index != self.partition:
                    continue
                if int(p.error_code) != 0:
                    raise FetchUnavailable(f"fetch error {p.error_code!s}")
                return FetchResult(bytes(p.records or b""), int(p.high_watermark),
                                   int(p.last_stable_offset), bool(p.aborted_transactions))
        raise FetchUnavailable("partition missing from the fetch response")

    def close(self) -> None:
        self._conn.close()
