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

import struct
from dataclasses import dataclass
from typing import Any

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.response_header import parse_response_header

from .wire import TRANSACTION_KEY, WireClient, WireError

OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")
DESCRIBE_VERSION = 0

# The coordinator refused: `code` says why (PRODUCER_FENCED, INVALID_TXN_STATE ...).
TransactionError = WireError


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """A transactional id as its coordinator describes it."""

    transactional_id: str
    state: str  # "Ongoing", "CompleteCommit" ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]


class TransactionClient(WireClient):
    """A blocking client for `describe`, `end`, `fence` and `list_open`. Not thread-safe;
    close it when done."""

    def describe(self, transactional_id: str) -> TransactionInfo:
        """The id's state, producer id and epoch, and the partitions of its open transaction."""
        answer = self.coordinated(
            transactional_id, TRANSACTION_KEY, ApiKey.DESCRIBE_TRANSACTIONS, DESCRIBE_VERSION,
            {"transactional_ids": [transactional_id]}, lambda r: r.error_code, _decode_describe)
        return answer.info

    def end(self, transactional_id: str, producer_id: int, producer_epoch: int,
            commit: bool) -> None:
        """Commit (or abort) the open transaction of (producer id, epoch); raises
        TransactionError if the coordinator refuses."""
        self.coordinated(transactional_id, TRANSACTION_KEY, ApiKey.END_TXN, 3, {
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "committed": commit}, lambda r: r.error_code)

    def fence(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """InitProducerId: abort the id's open transaction (if any) and bump its epoch, fencing
        every producer that still holds the old one. Returns the new (producer id, epoch)."""
        answer = self.coordinated(transactional_id, TRANSACTION_KEY, ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": transactional_id, "transaction_timeout": timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, lambda r: r.error_code)
        return int(answer.producer_id), int(answer.producer_epoch)

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn: make `partitions` part of the open transaction (before writing
        to them)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        self.coordinated(transactional_id, TRANSACTION_KEY, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": sorted(ps)}
                                    for t, ps in sorted(by_topic.items())]}, _add_error)

    def list_open(self, prefix: str = "") -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state) of every transaction open on the cluster whose
        id starts with `prefix` (ListTransactions, Kafka 3.0+, asked of every broker)."""
        found = []
        for address in self.brokers():
            answer = self.request(address, ApiKey.LIST_TRANSACTIONS, 0,
                                  {"state_filters": list(OPEN_STATES), "producer_id_filters": []})
            code = ErrorCode(answer.error_code)
            if code != ErrorCode.none:
                raise TransactionError(code, f"LIST_TRANSACTIONS on {address}")
            found += [(t.transactional_id, int(t.producer_id), t.transaction_state)
                      for t in answer.transaction_states
                      if t.transactional_id.startswith(prefix)]
        return sorted(found)


def _add_error(answer: Any) -> int:
    return next((int(p.partition_error_code) for t in answer.results_by_topic_v3_and_below
                 for p in t.results_by_partition if p.partition_error_code != ErrorCode.none), 0)


@dataclass(frozen=True, slots=True)
class _Described:
    error_code: int
    info: TransactionInfo


def _decode_describe(data: memoryview) -> _Described:
    _correlation, body = parse_response_header(data, ApiKey.DESCRIBE_TRANSACTIONS,
                                               DESCRIBE_VERSION)
    return _describe_response(body)


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
