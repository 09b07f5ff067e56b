"""A blocking request/response connection pool to Kafka brokers, over plaintext, through the
project's protocol codecs — the plumbing under the small clients of this package.

It does one request at a time per connection (correlation ids checked), finds coordinators
(FindCoordinator v3) and partition leaders (Metadata v1), and retries coordinator requests
while the answer is retriable (a coordinator loading, moving, or busy with a transaction). It
speaks Kafka's protocol only, so it works against any Kafka broker; it is meant for a handful of
control requests, where a librdkafka client's start-up (tens of milliseconds for its first
connection) would cost more than the requests themselves.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

from spark_log.protocol import ErrorCode, decode_response, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

GROUP_KEY, TRANSACTION_KEY = 0, 1
RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
                       ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
MAX_BACKOFF_S = 1.0


class WireError(Exception):
    """A broker refused: `code` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{message}: {code.name.upper()}")
        self.code = code


Decoder = Callable[[memoryview], Any]


class WireClient:
    """Connections to the brokers of one cluster, one per address. Not thread-safe; close it.
    Invariant: a connection whose request failed midway is closed and forgotten."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0,
                 client_id: str = "spark-log") -> None:
        self.addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
        self.bootstrap = self.addresses[0]  # the one that answered last
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._sockets: dict[str, socket.socket] = {}
        self._correlation = 0

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests -----------------------------------------------------------------------------
    def request(self, address: str, api_key: int, version: int, body: dict[str, Any],
                decode: Decoder | None = None) -> Any:
        """Send one request to `address` and return its decoded response."""
        spec = spec_for(api_key)
        assert spec is not None
        self._correlation += 1
        frame = encode_request(self._correlation, self.client_id,
                               build(spec.request_type(version), body))
        sock = self._socket(address)
        try:
            sock.sendall(frame)
            size = struct.unpack(">i", _read(sock, 4))[0]
            data = memoryview(_read(sock, size))
        except OSError:
            self._sockets.pop(address, None)
            sock.close()
            raise
        if decode is not None:
            correlation = struct.unpack_from(">i", data)[0]
            response = decode(data)
        else:
            correlation, response = decode_response(data, api_key, version)
        assert correlation == self._correlation
        return response

    def coordinated(self, key: str, key_type: int, api_key: int, version: int,
                    body: dict[str, Any], error: Callable[[Any], int],
                    decode: Decoder | None = None) -> Any:
        """Send a request to the coordinator of `key`, again while the answer is retriable,
        within the client's timeout; raises WireError for any other error."""
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.02
        while True:
            try:
                answer = self.request(self.coordinator(key, key_type), api_key, version, body,
                                      decode)
            except OSError:
                # The coordinator died, or closed the connection because its write could not
                # be replicated: ask whoever coordinates now.
                if time.monotonic() + backoff > deadline:
                    raise
                self.close()
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            code = ErrorCode(error(answer))
            if code == ErrorCode.none:
                return answer
            if code not in RETRIABLE or time.monotonic() + backoff > deadline:
                raise WireError(code, f"{ApiKey(api_key).name} for {key}")
            if code == ErrorCode.not_coordinator:
                self.close()
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def any_broker(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send a request to the first bootstrap broker that answers (the last one that did
        first)."""
        failure: OSError | None = None
        for address in [self.bootstrap, *(a for a in self.addresses if a != self.bootstrap)]:
            try:
                answer = self.request(address, api_key, version, body)
            except OSError as e:
                failure = e
                continue
            self.bootstrap = address
            return answer
        assert failure is not None
        raise failure

    # ---- discovery ----------------------------------------------------------------------------
    def coordinator(self, key: str, key_type: int) -> str:
        """The coordinator's address; the bootstrap broker while none is known (the request
        sent there answers NOT_COORDINATOR or the like, and is retried)."""
        response = self.any_broker(ApiKey.FIND_COORDINATOR, 3,
                                   {"key": key, "key_type": key_type})
        if response.error_code != ErrorCode.none:
            return self.bootstrap
        return f"{response.host}:{response.port}"

    def brokers(self) -> list[str]:
        meta = self.any_broker(ApiKey.METADATA, 1, {"topics": []})
        return sorted(f"{b.host}:{b.port}" for b in meta.brokers) or [self.bootstrap]

    def leaders(self, topics: Iterable[str], create: bool = False
                ) -> dict[tuple[str, int], str]:
        """(topic, partition) -> address of its leader, for the topics that exist. Metadata v4,
        so that a topic merely looked up is not created with the broker's defaults (below v4 a
        broker with auto.create.topics.enable creates it) unless `create` asks for that."""
        meta = self.any_broker(ApiKey.METADATA, 4,
                               {"topics": [{"name": t} for t in sorted(set(topics))],
                                "allow_auto_topic_creation": create})
        address = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
        return {(t.name, p.partition_index): address[p.leader_id] for t in meta.topics
                if t.error_code == ErrorCode.none for p in t.partitions
                if p.error_code == ErrorCode.none and p.leader_id in address}

    def _socket(self, address: str) -> socket.socket:
        sock = self._sockets.get(address)
        if sock is None:
            host, port = address.rsplit(":", 1)
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets[address] = sock
        return sock


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
