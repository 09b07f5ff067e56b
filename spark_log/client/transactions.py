"""Ending a transaction from a process other than the one that wrote it (two-phase commit, as
Flink's and Spark's exactly-once Kafka sinks "resume" a prepared transaction), and the
coordinator-side views and fencing a committer needs around it.

A writer runs a transaction up to, but not including, its commit, and hands over its
transactional id, producer id and epoch (`describe` reads them from the coordinator). Any
process can then `end` it: an EndTxn request naming the three, sent to the transaction
coordinator, which accepts it from any connection as long as no InitProducerId for that
transactional id has bumped the epoch since and the transaction has not timed out
(transaction.timeout.ms). A commit repeated after it succeeded answers NONE, so a driver may
retry safely; an abort after a commit (or the reverse) is INVALID_TXN_STATE.

`fence` is InitProducerId for a transactional id: the coordinator aborts whatever transaction the
id has open and bumps its epoch, so a writer still running with the old epoch (a zombie task) can
neither write nor commit any more. `list_open` is ListTransactions on every broker: the ids with a
transaction open, which is how a restarted writer finds what a dead run left behind.

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
from spark_log.protocol.response_header import parse_response_header

TRANSACTION_KEY_TYPE = 1
RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
                       ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
_VERSIONS = {ApiKey.FIND_COORDINATOR: 3, ApiKey.END_TXN: 3, ApiKey.DESCRIBE_TRANSACTIONS: 0,
             ApiKey.INIT_PRODUCER_ID: 3, ApiKey.LIST_TRANSACTIONS: 0, ApiKey.METADATA: 1}
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


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
        """The id's state, producer id and epoch, and the partitions of its open transaction."""
        return self._retrying(transactional_id, ApiKey.DESCRIBE_TRANSACTIONS,
                              {"transactional_ids": [transactional_id]}, lambda r: r.info)

    def end(self, transactional_id: str, producer_id: int, producer_epoch: int,
            commit: bool) -> None:
        """Commit (or abort) the open transaction of (producer id, epoch); raises
        TransactionError if the coordinator refuses."""
        self._retrying(transactional_id, ApiKey.END_TXN, {
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "committed": commit}, lambda r: r)

    def fence(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """InitProducerId: abort the id's open transaction (if any) and bump its epoch, fencing
        every producer that still holds the old one. Returns the new (producer id, epoch)."""
        answer = self._retrying(transactional_id, ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": transactional_id, "transaction_timeout": timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, lambda r: r)
        return int(answer.producer_id), int(answer.producer_epoch)

    def list_open(self, prefix: str = "") -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state) of every transaction open on the cluster whose
        id starts with `prefix` (ListTransactions, Kafka 3.0+, asked of every broker)."""
        found = []
        for address in self._brokers():
            answer = self._request(address, ApiKey.LIST_TRANSACTIONS,
                                   {"state_filters": list(OPEN_STATES), "producer_id_filters": []})
            code = ErrorCode(answer.error_code)
            if code != ErrorCode.none:
                raise TransactionError(code, f"LIST_TRANSACTIONS on {address}")
            found += [(t.transactional_id, int(t.producer_id), t.transaction_state)
                      for t in answer.transaction_states
                      if t.transactional_id.startswith(prefix)]
        return sorted(found)

    # ---- plumbing -----------------------------------------------------------------------------
    def _retrying(self, transactional_id: str, api_key: int, body: dict[str, Any],
                  pick: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.02
        while True:
            coordinator = self._coordinator(transactional_id)
            answer = self._request(coordinator, api_key, body)
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.none:
                return pick(answer)
            if code not in RETRIABLE or time.monotonic() + backoff > deadline:
                raise TransactionError(code, f"{ApiKey(api_key).name} for {transactional_id}")
            if code == ErrorCode.not_coordinator:
                self.close()
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _brokers(self) -> list[str]:
        meta = self._request(self.bootstrap, ApiKey.METADATA, {"topics": []})
        return sorted(f"{b.host}:{b.port}" for b in meta.brokers) or [self.bootstrap]

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
            data = _read(sock, size)
        except OSError:
            self._sockets.pop(address, None)
            sock.close()
            raise
        if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
            correlation, body = parse_response_header(data, api_key, version)
            response: Any = _describe_response(body)
        else:
            correlation, response = decode_response(data, api_key, version)
        assert correlation == self._correlation
        return response

    def _socket(self, address: str) -> socket.socket:
        sock = self._sockets.get(address)
        if sock is None:
            host, port = address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=self.timeout_s)
            self._sockets[address] = sock
        return sock


@dataclass(frozen=True, slots=True)
class _Described:
    error_code: int
    info: TransactionInfo


def _describe_response(body: memoryview | bytes) -> _Described:
    """DescribeTransactions v0, first entry, read by hand: its start time is -1 when no
    transaction is open, which the generated decoder refuses."""
    r = _Reader(bytes(body))
    r.int32()  # throttle time
    r.uvarint()  # entries + 1: one was asked for
    code = r.int16()
    transactional_id, state = r.string(), r.string()
    timeout_ms = r.int32()
    r.int64()  # start time
    producer_id, epoch = r.int64(), r.int16()
    partitions = []
    for _ in range(r.uvarint() - 1):
        topic = r.string()
        partitions += [(topic, r.int32()) for _ in range(r.uvarint() - 1)]
        r.skip_tags()
    info = TransactionInfo(transactional_id, state, producer_id, epoch, timeout_ms,
                           tuple(partitions))
    return _Described(code, info)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self) -> str:
        size = self.uvarint() - 1
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
