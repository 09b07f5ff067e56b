"""Ending a transaction from a process other than the one that wrote it (two-phase commit, as
Flink's and Spark's exactly-once Kafka sinks "resume" a prepared transaction).

A writer runs a transaction up to, but not including, its commit, and hands over its
transactional id, producer id and epoch (`describe` reads them from the coordinator). Any
process can then `end` it: an EndTxn request naming the three, sent to the transaction
coordinator, which accepts it from any connection as long as no InitProducerId for that
transactional id has bumped the epoch since and the transaction has not timed out
(transaction.timeout.ms). A commit repeated after it succeeded answers NONE, so a driver may
retry safely; an abort after a commit (or the reverse) is INVALID_TXN_STATE.

Works against any Kafka broker (the requests are Kafka's): librdkafka cannot send EndTxn for a
producer id it did not initialize, hence this small blocking client.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from spark_log.protocol import ErrorCode, decode_response, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

TRANSACTION_KEY_TYPE = 1
RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
                       ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
_VERSIONS = {ApiKey.FIND_COORDINATOR: 3, ApiKey.END_TXN: 3, ApiKey.DESCRIBE_TRANSACTIONS: 0}


class TransactionError(Exception):
    """The coordinator refused: `code` says why (PRODUCER_FENCED, INVALID_TXN_STATE ...)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{message}: {code.name.upper()}")
        self.code = code


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """A transactional id as its coordinator describes it."""

    transactional_id: str
    state: str  # "Ongoing", "CompleteCommit" ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]


class TransactionClient:
    """A blocking client for `describe` and `end`. Not thread-safe; close it when done."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0, client_id: str = "spark-log"
                 ) -> None:
        self.bootstrap = bootstrap.split(",")[0].strip()
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._sockets: dict[str, socket.socket] = {}
        self._correlation = 0

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def __enter__(self) -> TransactionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- API ----------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionInfo:
        state = self._retrying(transactional_id, ApiKey.DESCRIBE_TRANSACTIONS,
                               {"transactional_ids": [transactional_id]},
                               lambda r: r.transaction_states[0])
        return TransactionInfo(
            transactional_id, state.transaction_state, state.producer_id, state.producer_epoch,
            int(state.transaction_timeout.total_seconds() * 1000),
            tuple((t.topic, p) for t in state.topics for p in t.partitions))

    def end(self, transactional_id: str, producer_id: int, producer_epoch: int,
            commit: bool) -> None:
        """Commit (or abort) the open transaction of (producer id, epoch); raises
        TransactionError if the coordinator refuses."""
        self._retrying(transactional_id, ApiKey.END_TXN, {
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "committed": commit}, lambda r: r)

    # ---- plumbing -----------------------------------------------------------------------------
    def _retrying(self, transactional_id: str, api_key: int, body: dict[str, Any],
                  pick: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.02
        while True:
            coordinator = self._coordinator(transactional_id)
            answer = pick(self._request(coordinator, api_key, body))
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.none:
                return answer
            if code not in RETRIABLE or time.monotonic() + backoff > deadline:
                raise TransactionError(code, f"{ApiKey(api_key).name} for {transactional_id}")
            if code == ErrorCode.not_coordinator:
                self.close()
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _coordinator(self, transactional_id: str) -> str:
        response = self._request(self.bootstrap, ApiKey.FIND_COORDINATOR,
                                 {"key": transactional_id, "key_type": TRANSACTION_KEY_TYPE})
        if response.error_code != ErrorCode.none:
            return self.bootstrap  # the retry loop asks again
        return f"{response.host}:{response.port}"

    def _request(self, address: str, api_key: int, body: dict[str, Any]) -> Any:
        version = _VERSIONS[api_key]
        spec = spec_for(api_key)
        assert spec is not None
        self._correlation += 1
        frame = encode_request(self._correlation, self.client_id,
                               build(spec.request_type(version), body))
        sock = self._socket(address)
        try:
            sock.sendall(frame)
            size = struct.unpack(">i", _read(sock, 4))[0]
            correlation, response = decode_response(_read(sock, size), api_key, version)
        except OSError:
            self._sockets.pop(address, None)
            sock.close()
            raise
        assert correlation == self._correlation
        return response

    def _socket(self, address: str) -> socket.socket:
        sock = self._sockets.get(address)
        if sock is None:
            host, port = address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=self.timeout_s)
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
