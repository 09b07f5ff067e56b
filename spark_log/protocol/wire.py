"""Bounds-checked primitive readers and writers shared by the hand-written codecs.

kio's native readers decode whole entities; the few places that walk bytes themselves (request
header, unknown-tag skipping, the Fetch encoder) use these. Every reader takes a buffer, a
position and an end, returns `(value, new_position)`, and raises `ProtocolError` naming what
ran past the end instead of returning garbage.
"""

from __future__ import annotations

import functools
import struct
import uuid

from .errors import ProtocolError

__all__ = [
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "need",
    "read_compact_length",
    "read_fixed",
    "read_int16",
    "read_int32",
    "read_uvarint",
    "skip_tag_section",
    "uuid_of",
    "uvarint",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

_ONE_BYTE = [bytes((n,)) for n in range(0x80)]
_MAX_VARINT_BYTES = 5  # an unsigned varint carries at most 32 bits (Kafka's limit)


def need(end: int, pos: int, count: int, what: str) -> None:
    """Raise unless `count` bytes of `what` fit between `pos` and `end`."""
    if count < 0 or pos + count > end:
        raise ProtocolError(f"truncated {what}: need {count} bytes at {pos}, have {end - pos}")


def read_fixed(buf: memoryview, pos: int, end: int, fmt: struct.Struct, what: str) -> tuple:
    need(end, pos, fmt.size, what)
    return fmt.unpack_from(buf, pos)[0], pos + fmt.size


def read_int16(buf: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    return read_fixed(buf, pos, end, INT16, what)


def read_int32(buf: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    return read_fixed(buf, pos, end, INT32, what)


def read_uvarint(buf: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as Kafka writes lengths, counts and tags."""
    if pos < end and buf[pos] < 0x80:  # one byte: nearly every length, count and tag
        return buf[pos], pos + 1
    value = shift = 0
    for index in range(_MAX_VARINT_BYTES):
        need(end, pos, 1, what)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if index == _MAX_VARINT_BYTES - 1 and byte > 0x0F:
                raise ProtocolError(f"{what}: varint exceeds 32 bits at {pos - 1}")
            return value, pos
        shift += 7
    raise ProtocolError(f"{what}: varint longer than {_MAX_VARINT_BYTES} bytes at {pos - 1}")


def read_compact_length(buf: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    """A compact length/count: uvarint N+1, so -1 means null."""
    raw, pos = read_uvarint(buf, pos, end, what)
    return raw - 1, pos


def skip_tag_section(buf: memoryview, pos: int, end: int, what: str) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes each); return the position after."""
    if pos < end and buf[pos] == 0:  # nearly always: no tagged fields
        return pos + 1
    count, pos = read_uvarint(buf, pos, end, f"{what} tag count")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end, f"{what} tag")
        size, pos = read_uvarint(buf, pos, end, f"{what} tag size")
        need(end, pos, size, f"{what} tagged field")
        pos += size
    return pos


def uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@functools.lru_cache(maxsize=4096)
def uuid_of(raw: bytes) -> uuid.UUID:
    """The UUID of 16 bytes, one object per distinct id: ids (topics, directories) repeat in
    every Fetch a consumer sends and in most metadata records, and a UUID is immutable."""
    return uuid.UUID(bytes=raw)
