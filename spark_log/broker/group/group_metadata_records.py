"""The records of `__consumer_offsets`, byte for byte as Kafka writes them.

A record's key starts with an int16 version that names its type: 0 and 1 are an
`OffsetCommitKey` (group, topic, partition), 2 a `GroupMetadataKey` (group); Kafka's newer
group types use 3 to 15 (`KAFKA_RECORD_TYPES`), which this broker neither writes nor needs and
reads as `UnknownKey`, as it does any other type.
Values carry their own int16 version:

* `OffsetCommitValue` v0-4: offset, leader epoch (v3+), metadata, commit timestamp and, in v1
  only, an expire timestamp (a commit that asked for its own retention). Written as v3, or v1
  when an expire timestamp is set, as Kafka does.
* `GroupMetadataValue` v0-4: protocol type, generation, protocol, leader, state timestamp (v2+)
  and the members with their subscription and assignment bytes. Written as v3.

v4 of both values is Kafka's first flexible version (compact lengths, tagged fields); it is
decoded too. A null value is a tombstone. Keys and values are immutable dataclasses; every
decoder raises `CorruptRecordError` on bytes that do not parse.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.wire import (
    INT16,
    INT32,
    INT64,
    need,
    read_compact_length,
    read_fixed,
    skip_tag_section,
)
from spark_log.records import CorruptRecordError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
_FLEXIBLE_FROM = 4
# Kafka's consumer group (KIP-848) and share group record types: known, not used here.
KAFKA_RECORD_TYPES = range(3, 16)

_KEY = "__consumer_offsets key"
_OFFSET_COMMIT_VALUE = "OffsetCommitValue"
_GROUP_METADATA_VALUE = "GroupMetadataValue"
_Decoder = TypeVar("_Decoder", bound=Callable[[bytes], object])


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a record type this broker does not use (KIP-848 groups, share groups ...)."""

    version: int


CoordinatorKey = OffsetCommitKey | GroupMetadataKey | UnknownKey


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # -1: none (retention follows offsets.retention.minutes)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# ---- writing --------------------------------------------------------------------------------


class _Writer:
    """Non-flexible encoding: int16-length strings, int32-length bytes and arrays."""

    def __init__(self, version: int) -> None:
        self.out = bytearray(INT16.pack(version))

    def i32(self, value: int) -> None:
        self.out += INT32.pack(value)

    def i64(self, value: int) -> None:
        self.out += INT64.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.out += INT16.pack(-1)
            return
        data = value.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
        self.out += INT16.pack(len(data)) + data

    def bytes_(self, value: bytes) -> None:
        self.out += INT32.pack(len(value)) + value


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        w = _Writer(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.i32(key.partition)
        return bytes(w.out)
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v3, or v1 (the only version with an expire timestamp) when one is set."""
    if value.expire_timestamp >= 0:
        w = _Writer(OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
        return bytes(w.out)
    w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# ---- reading --------------------------------------------------------------------------------


class _Reader:
    """Reads one key or value with the protocol's bounds-checked readers (which raise
    ProtocolError past the end); `flexible` switches to compact lengths and tagged fields."""

    def __init__(self, data: bytes, what: str) -> None:
        self.buf = memoryview(data)
        self.pos, self.end = 0, len(data)
        self.what = what
        self.flexible = False

    def _fixed(self, fmt: struct.Struct) -> int:
        value, self.pos = read_fixed(self.buf, self.pos, self.end, fmt, f"int{8 * fmt.size}")
        return value

    def _take(self, count: int) -> bytes:
        need(self.end, self.pos, count, "string or bytes")
        self.pos += count
        return bytes(self.buf[self.pos - count : self.pos])

    def i16(self) -> int:
        return self._fixed(INT16)

    def i32(self) -> int:
        return self._fixed(INT32)

    def i64(self) -> int:
        return self._fixed(INT64)

    def _length(self, fixed: struct.Struct) -> int:
        """A length: `fixed` (int16 for strings, int32 for bytes and arrays), or compact
        (uvarint N+1) when flexible; -1 is null."""
        if self.flexible:
            size, self.pos = read_compact_length(self.buf, self.pos, self.end, "compact length")
            return size
        return self._fixed(fixed)

    def nullable_string(self) -> str | None:
        size = self._length(INT16)
        if size < 0:
            return None
        try:
            return self._take(size).decode()
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"{self.what}: invalid UTF-8 string: {e}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptRecordError(f"{self.what}: null where a string is required")
        return value

    def bytes_(self) -> bytes:
        size = self._length(INT32)
        return b"" if size < 0 else self._take(size)

    def array_length(self) -> int:
        return max(self._length(INT32), 0)

    def skip_tags(self) -> None:
        if self.flexible:
            self.pos = skip_tag_section(self.buf, self.pos, self.end, "tagged fields")


def _corrupt_on_protocol_error(what: str) -> Callable[[_Decoder], _Decoder]:
    """Decorate a decoder so the readers' ProtocolError (bytes cut short, an overlong varint)
    becomes this module's CorruptRecordError, naming the record being read."""

    def decorate(decode: _Decoder) -> _Decoder:
        @functools.wraps(decode)
        def decoding(data: bytes) -> object:
            try:
                return decode(data)
            except ProtocolError as e:
                raise CorruptRecordError(f"{what}: {e}") from None

        return cast(_Decoder, decoding)

    return decorate


@_corrupt_on_protocol_error(_KEY)
def decode_key(data: bytes) -> CoordinatorKey:
    r = _Reader(data, _KEY)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    return UnknownKey(version)


def _value_reader(data: bytes, what: str, highest: int) -> tuple[_Reader, int]:
    r = _Reader(data, what)
    version = r.i16()
    if not 0 <= version <= highest:
        raise CorruptRecordError(f"{what}: unknown version {version}")
    r.flexible = version >= _FLEXIBLE_FROM
    return r, version


@_corrupt_on_protocol_error(_OFFSET_COMMIT_VALUE)
def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r, version = _value_reader(data, _OFFSET_COMMIT_VALUE, 4)
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


@_corrupt_on_protocol_error(_GROUP_METADATA_VALUE)
def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r, version = _value_reader(data, _GROUP_METADATA_VALUE, 4)
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.i64() if version >= 2 else -1
    members = tuple(_decode_member(r, version) for _ in range(r.array_length()))
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp,
                              members)


def _decode_member(r: _Reader, version: int) -> MemberMetadata:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.i32() if version >= 1 else -1
    session_timeout = r.i32()
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.skip_tags()
    return MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                          session_timeout, subscription, assignment)
