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

KEY_VERSION = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")


class TransactionLogError(ValueError):
    """A `__transaction_state` record that does not parse."""


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
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    if len(data) < 4:
        raise TransactionLogError(f"transaction log key of {len(data)} bytes")
    (version,) = _I16.unpack_from(data)
    if version != KEY_VERSION:
        raise TransactionLogError(f"unknown transaction log key version {version}")
    (size,) = _I16.unpack_from(data, 2)
    if size < 0 or 4 + size > len(data):
        raise TransactionLogError("transaction log key: bad string length")
    return data[4 : 4 + size].decode()


def encode_value(v: TransactionLogValue) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.state)
    out += _I32.pack(len(v.partitions))
    for topic, ids in v.partitions.items():
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
        out += struct.pack(f">{len(ids)}i", *ids)
    out += _TIMES.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TransactionLogValue:
    try:
        (version,) = _I16.unpack_from(data)
        if version == 0:
            return _Reader(data, 2, flexible=False).value()
        if version == 1:
            return _Reader(data, 2, flexible=True).value()
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise TransactionLogError(f"unreadable transaction log value: {e}") from e
    raise TransactionLogError(f"unknown transaction log value version {version}")


class _Reader:
    """Reads a value body in the v0 (classic) or v1 (flexible) encoding."""

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data, self.pos, self.flexible = data, pos, flexible

    def _unpack(self, s: struct.Struct) -> tuple[int, ...]:
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def _uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def _length(self) -> int:
        """An array or string length; -1 for null."""
        if self.flexible:
            return self._uvarint() - 1
        return self._unpack(_I32)[0]

    def _string(self) -> str:
        size = self._uvarint() - 1 if self.flexible else self._unpack(_I16)[0]
        raw = self.data[self.pos : self.pos + size]
        if size < 0 or len(raw) != size:
            raise TransactionLogError("bad string in transaction log value")
        self.pos += size
        return raw.decode()

    def _skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self._uvarint()):
            self._uvarint()
            self.pos += self._uvarint()

    def value(self) -> TransactionLogValue:
        pid, epoch, timeout, state = self._unpack(_HEAD)
        partitions: dict[str, tuple[int, ...]] = {}
        for _ in range(max(0, self._length())):
            topic = self._string()
            count = self._length()
            ids = struct.unpack_from(f">{count}i", self.data, self.pos)
            self.pos += 4 * count
            self._skip_tags()
            partitions[topic] = tuple(ids)
        last_update, start = self._unpack(_TIMES)
        self._skip_tags()
        return TransactionLogValue(pid, epoch, timeout, state, partitions, last_update, start)
