"""Kafka's zigzag varints: the variable-length integers inside v2 records.

Record fields use zigzag encoding (protobuf's sint32/sint64): a varint holds an int32 (lengths,
offset delta, header count) and a varlong an int64 (timestamp delta); both are at most 5 and 10
bytes. Reading multi-byte values uses kio's native readers, which measured faster than a Python
loop; one-byte values, the common case for deltas and small lengths, are decoded through
`ZIGZAG_BYTE` by callers that inline the fast path (see `record`).
"""

from __future__ import annotations

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from .errors import CorruptRecordError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# ZIGZAG_BYTE[b] is the value of the one-byte varint b (b < 0x80): 0, -1, 1, -2, ...
ZIGZAG_BYTE: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))

# Errors the native readers raise on bad input: truncation (DecodeError), more than 5/10 bytes
# (ValueError), a writable buffer (ValueError: they only take read-only buffers).
VARINT_ERRORS = (DecodeError, ValueError, IndexError)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read the int32 varint at `pos`; return (value, position after it).

    `buf` must be read-only (bytes or a read-only memoryview).
    """
    return _read(read_signed_varint, buf, pos, INT32_MIN, INT32_MAX, "varint")


def read_varlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read the int64 varlong at `pos`; return (value, position after it)."""
    return _read(read_signed_varlong, buf, pos, INT64_MIN, INT64_MAX, "varlong")


def _read(reader, buf, pos: int, low: int, high: int, kind: str) -> tuple[int, int]:
    try:
        value, size = reader(buf, pos)
    except VARINT_ERRORS as exc:
        raise CorruptRecordError(f"bad {kind} at byte {pos}: {exc}") from None
    if not low <= value <= high:
        # The 5th (10th) byte carried bits beyond 32 (64): no encoder writes that.
        raise CorruptRecordError(f"{kind} at byte {pos} out of range: {value}")
    return value, pos + size


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (any int64; int32 callers get the same bytes) zigzag-encoded to `out`."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def varint_size(value: int) -> int:
    """Bytes `write_varint` uses for `value`."""
    zigzag = (value << 1) ^ (value >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)
