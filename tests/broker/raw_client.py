"""A blocking Kafka-protocol client for tests that must send exact bytes: hand-built requests,
corrupt batches, malformed frames. Requests are built with `entity_build.build` from plain dicts,
encoded and decoded by the project's protocol layer."""

from __future__ import annotations

import socket
import struct
from typing import Any

from spark_log.protocol import decode_response, encode_request, spec_for
from spark_log.protocol.entity_build import build

TIMEOUT_S = 30.0


class ConnectionClosed(Exception):
    """The broker closed the connection."""


class RawClient:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and return the decoded response entity."""
        spec = spec_for(api_key)
        assert spec is not None
        entity = build(spec.request_type(version), body)
        self._correlation += 1
        self.sock.sendall(encode_request(self._correlation, "raw-test", entity))
        correlation, response = decode_response(self.read_frame(), api_key, version)
        assert correlation == self._correlation
        return response

    def send_frame(self, payload: bytes) -> None:
        """Send `payload` with a correct size prefix."""
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionClosed()
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def is_closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (waits up to the socket timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
