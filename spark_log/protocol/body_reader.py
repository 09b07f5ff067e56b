"""Reading a request body by hand, for the hand-written readers of the hottest requests
(`produce_request`, `fetch_request`): bounds-checked primitives that know the classic and the
flexible (KIP-482) encodings of lengths, counts and tagged fields.
"""

from __future__ import annotations

import struct
import uuid

from .errors import ProtocolError
from .wire import read_uvarint, uuid_of

__all__ = ["BodyReader"]

_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")
_ZERO_UUID = bytes(16)


class BodyReader:
    """A position in a request body (or in one tagged field's value). Invariant: `pos <= end`;
    every read checks its length against `end` before taking bytes, so no count or length can
    make it read or allocate past the frame."""

    __slots__ = ("buf", "end", "flexible", "pos")

    def __init__(self, buf: memoryview, flexible: bool, end: int | None = None,
                 pos: int = 0) -> None:
        self.buf, self.flexible, self.pos = buf, flexible, pos
        self.end = len(buf) if end is None else end

    def fixed(self, fmt: struct.Struct, what: str | tuple[str, ...]) -> tuple:
        """The fields of `fmt` (one-letter codes, no counts); `what` names them all, or each
        one, so that a truncated body names the field it ends in."""
        pos = self.pos
        if pos + fmt.size > self.end:
            raise _truncated(fmt, what, pos, self.end)
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.buf, pos)

    def int8(self, what: str) -> int:
        return self.fixed(_I8, what)[0]

    def int32(self, what: str) -> int:
        return self.fixed(_I32, what)[0]

    def int64(self, what: str) -> int:
        return self.fixed(_I64, what)[0]

    def _length(self, what: str, classic: struct.Struct) -> int:
        """A length or count: int16/int32 before the flexible versions, uvarint N+1 in them;
        -1 is null."""
        pos = self.pos
        if self.flexible:
            if pos < self.end and self.buf[pos] < 0x80:  # one byte: nearly always
                self.pos = pos + 1
                return self.buf[pos] - 1
            raw, self.pos = read_uvarint(self.buf, pos, self.end, what)
            return raw - 1
        if pos + classic.size > self.end:
            raise ProtocolError(f"truncated {what} at {pos}")
        self.pos = pos + classic.size
        return classic.unpack_from(self.buf, pos)[0]

    def count(self, what: str) -> int:
        n = self._length(what, _I32)
        if n < 0:
            raise ProtocolError(f"non-nullable array {what} was null")
        if n > self.end - self.pos:  # every element takes at least one byte
            raise ProtocolError(f"{what} claims {n} elements in {self.end - self.pos} bytes")
        return n

    def nullable_string(self, what: str) -> str | None:
        raw = self._nullable(what, _I16)
        if raw is None:
            return None
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{what} is not UTF-8: {e}") from None

    def string(self, what: str) -> str:
        value = self.nullable_string(what)
        if value is None:
            raise ProtocolError(f"{what} is null")
        return value

    def nullable_bytes(self, what: str) -> memoryview | None:
        """Bytes (records) as a view of the body: no copy."""
        return self._nullable(what, _I32)

    def _nullable(self, what: str, classic: struct.Struct) -> memoryview | None:
        n = self._length(what, classic)
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"{what} has length {n}")
        return self.take(n, what)

    def uuid(self, what: str) -> uuid.UUID | None:
        raw = bytes(self.take(16, what))
        return None if raw == _ZERO_UUID else uuid_of(raw)

    def tags(self, what: str) -> list[tuple[int, BodyReader]]:
        """The tagged fields here, each with a reader over just its value (none before the
        flexible versions)."""
        if not self.flexible:
            return []
        if self.pos < self.end and self.buf[self.pos] == 0:  # no tagged fields: nearly always
            self.pos += 1
            return []
        count, self.pos = read_uvarint(self.buf, self.pos, self.end, f"{what} tag count")
        out = []
        for _ in range(count):
            tag, self.pos = read_uvarint(self.buf, self.pos, self.end, f"{what} tag")
            size, self.pos = read_uvarint(self.buf, self.pos, self.end, f"{what} tag size")
            start = self.pos
            self.take(size, f"{what} tagged field {tag}")
            out.append((tag, BodyReader(self.buf, True, start + size, start)))
        return out

    def take(self, n: int, what: str) -> memoryview:
        pos = self.pos
        if pos + n > self.end:
            raise ProtocolError(f"truncated {what}: {n} bytes at {pos}, {self.end - pos} left")
        self.pos = pos + n
        return self.buf[pos:pos + n]


def _truncated(fmt: struct.Struct, what: str | tuple[str, ...], pos: int,
               end: int) -> ProtocolError:
    if isinstance(what, tuple):
        for code, name in zip(fmt.format.lstrip("<>!=@"), what, strict=True):
            size = struct.calcsize(">" + code)
            if pos + size > end:
                return ProtocolError(f"truncated {name} at {pos}")
            pos += size
    return ProtocolError(f"truncated {what} at {pos}")
