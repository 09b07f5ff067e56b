"""The records of `__transaction_state` (Kafka's TransactionLogKey and TransactionLogValue).

Each record is keyed by its transactional id, so compaction keeps the latest state of every
id; a null value (tombstone) removes an expired id. Layout, big-endian, each prefixed by its
version as an int16:

* key v0: transactional id (string).
* value v0: producer id int64, producer epoch int16, transaction timeout ms int32, state int8,
  partitions (nullable array of topic string + partition ids []int32), last update timestamp
  int64, start timestamp int64.
* value v1 (read only): the same fields in the flexible encoding (compact arrays and strings,
  tagged fields; tags 0 and 1 are the previous and next producer id, tag 2 the client
  transaction version). Written values are v0, which every Kafka version reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.wire import INT16, INT32, need, read_compact_length, skip_tag_section

KEY_VERSION = 0
VALUE_VERSION = 0
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")


class TransactionLogError(ValueError):
    """A `__transaction_state` record that does not parse."""


class UnknownKeyVersionError(TransactionLogError):
    """A key of a version this broker does not know: a newer broker's record, not damage."""

    def __init__(self, version: int) -> None:
        super().__init__(f"unknown transaction log key version {version}")
        self.version = version


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A transactional id's state as stored. `partitions` maps topics to partition ids."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: dict[str, tuple[int, ...]]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return INT16.pack(KEY_VERSION) + INT16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    """The transactional id; UnknownKeyVersionError for a key of another version,
    TransactionLogError for one that does not parse."""
    if len(data) < 2:
        raise TransactionLogError(f"transaction log key of {len(data)} bytes")
    (version,) = INT16.unpack_from(data)
    if version != KEY_VERSION:
        raise UnknownKeyVersionError(version)
    if len(data) < 4:
        raise TransactionLogError(f"transaction log key of {len(data)} bytes")
    (size,) = INT16.unpack_from(data, 2)
    if size < 0 or 4 + size > len(data):
        raise TransactionLogError("transaction log key: bad string length")
    try:
        return data[4 : 4 + size].decode()
    except UnicodeDecodeError as e:
        raise TransactionLogError(f"transaction log key: invalid UTF-8: {e}") from None


def encode_value(v: TransactionLogValue) -> bytes:
    out = bytearray(INT16.pack(VALUE_VERSION))
    out += _HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.state)
    out += INT32.pack(len(v.partitions))
    for topic, ids in v.partitions.items():
        raw = topic.encode()
        out += INT16.pack(len(raw)) + raw + INT32.pack(len(ids))
        out += struct.pack(f">{len(ids)}i", *ids)
    out += _TIMES.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TransactionLogValue:
    try:
        (version,) = INT16.unpack_from(data)
        if version in (0, 1):
            return _Reader(data, 2, flexible=version == 1).value()
    except (struct.error, ProtocolError, UnicodeDecodeError) as e:
        raise TransactionLogError(f"unreadable transaction log value: {e}") from e
    raise TransactionLogError(f"unknown transaction log value version {version}")


class _Reader:
    """Reads a value body in the v0 (classic) or v1 (flexible) encoding with the protocol's
    bounds-checked readers: running past the end raises ProtocolError."""

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.end, self.flexible = memoryview(data), pos, len(data), flexible

    def _unpack(self, s: struct.Struct) -> tuple[int, ...]:
        need(self.end, self.pos, s.size, "transaction log value")
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def _length(self) -> int:
        """An array length; -1 for null."""
        if self.flexible:
            size, self.pos = read_compact_length(self.buf, self.pos, self.end, "array length")
            return size
        return self._unpack(INT32)[0]

    def _string(self) -> str:
        if self.flexible:
            size, self.pos = read_compact_length(self.buf, self.pos, self.end, "string length")
        else:
            (size,) = self._unpack(INT16)
        if size < 0:
            raise TransactionLogError("null topic name in transaction log value")
        need(self.end, self.pos, size, "topic name")
        self.pos += size
        return bytes(self.buf[self.pos - size : self.pos]).decode()

    def _skip_tags(self) -> None:
        if self.flexible:
            self.pos = skip_tag_section(self.buf, self.pos, self.end, "transaction log value")

    def value(self) -> TransactionLogValue:
        pid, epoch, timeout, state = self._unpack(_HEAD)
        partitions: dict[str, tuple[int, ...]] = {}
        for _ in range(max(0, self._length())):
            topic = self._string()
            count = self._length()
            if count < 0:
                raise TransactionLogError(f"null partition list for {topic!r}")
            ids = self._unpack(struct.Struct(f">{count}i"))
            self._skip_tags()
            partitions[topic] = tuple(ids)
        last_update, start = self._unpack(_TIMES)
        self._skip_tags()
        return TransactionLogValue(pid, epoch, timeout, state, partitions, last_update, start)
