"""Dropping tagged fields a schema does not know, which kio rejects but Kafka ignores.

KIP-482 lets a newer peer add tagged fields that older readers must skip. kio's native reader
raises instead, so on that error the codec re-encodes the message without the unknown tags
(`strip_unknown_tags`) and decodes again. Known tags are kept; those holding structs are
rewritten recursively, since a nested struct carries its own tag section. Everything else is
copied through unchanged, including records, which are opaque length-prefixed bytes.
"""

from __future__ import annotations

from .errors import ProtocolError
from .schema import EntityShape, FieldShape, Kind, shape_of
from .wire import (
    INT8,
    INT16,
    INT32,
    need,
    read_compact_length,
    read_fixed,
    read_uvarint,
    uvarint,
)

__all__ = ["check_structure", "strip_unknown_tags"]


def strip_unknown_tags(entity_type: type, body: bytes | bytearray | memoryview) -> bytes:
    """`body` (an encoded `entity_type`) with every unknown tagged field removed.

    Bytes after the entity are dropped. Raises `ProtocolError` if `body` does not follow the
    schema far enough to find the tags.
    """
    view = memoryview(body).cast("B")
    walker = _Rewriter(view)
    end = walker.entity(shape_of(entity_type), 0, len(view))
    walker.flush(end)
    return b"".join(walker.out)


def check_structure(entity_type: type, body: bytes | bytearray | memoryview) -> None:
    """Walk `body` as an encoded `entity_type` and raise `ProtocolError` at the first length or
    count that runs past the end.

    kio's native reader reserves room for an array's declared count before reading it, so a
    hostile count (billions of elements in a 20-byte frame) would abort the process; this walk
    runs first so such a request is an ordinary protocol error. It copies nothing.
    """
    view = memoryview(body).cast("B")
    _Rewriter(view, copy=False).entity(shape_of(entity_type), 0, len(view))


class _Rewriter:
    """Walks an encoded entity, copying it to `out` with unknown tags left out.

    Invariant: `out` holds exactly the rewritten bytes of `buf[:mark]`; bytes from `mark` on
    are still to be copied (verbatim, up to the next tag section).
    """

    __slots__ = ("buf", "copy", "mark", "out")

    def __init__(self, buf: memoryview, copy: bool = True) -> None:
        self.buf = buf
        self.copy = copy  # False: only validate the structure
        self.out: list[bytes | memoryview] = []
        self.mark = 0

    def flush(self, pos: int) -> None:
        if self.copy:
            self.out.append(self.buf[self.mark : pos])
        self.mark = pos

    def entity(self, shape: EntityShape, pos: int, end: int) -> int:
        for field in shape.fields:
            pos = self.field(field, shape.flexible, pos, end, in_tag=False)
        if shape.flexible:
            pos = self.tag_section(shape, pos, end)
        return pos

    def field(self, field: FieldShape, flexible: bool, pos: int, end: int, in_tag: bool) -> int:
        if not field.is_array:
            return self.value(field, flexible, pos, end, in_tag)
        if flexible:
            count, pos = read_compact_length(self.buf, pos, end, f"{field.name} count")
        else:
            count, pos = read_fixed(self.buf, pos, end, INT32, f"{field.name} count")
        if count < -1 or count > end - pos:
            raise ProtocolError(f"invalid {field.name} count {count} with {end - pos} bytes left")
        for _ in range(max(count, 0)):
            pos = self.value(field, flexible, pos, end, in_tag)
        return pos

    def value(self, field: FieldShape, flexible: bool, pos: int, end: int, in_tag: bool) -> int:
        if field.kind is Kind.FIXED:
            need(end, pos, field.size, field.name)
            return pos + field.size
        if field.kind is Kind.ENTITY:
            assert field.entity is not None
            if field.nullable and not field.is_array and not in_tag:
                marker, pos = read_fixed(self.buf, pos, end, INT8, f"{field.name} null marker")
                if marker == -1:
                    return pos
                if marker != 1:
                    raise ProtocolError(f"invalid null marker {marker} for {field.name}")
            return self.entity(shape_of(field.entity), pos, end)
        if flexible:
            length, pos = read_compact_length(self.buf, pos, end, f"{field.name} length")
        else:
            fmt = INT16 if field.kind is Kind.STRING else INT32
            length, pos = read_fixed(self.buf, pos, end, fmt, f"{field.name} length")
        if length < -1:
            raise ProtocolError(f"invalid {field.name} length {length}")
        need(end, pos, max(length, 0), field.name)
        return pos + max(length, 0)

    def tag_section(self, shape: EntityShape, pos: int, end: int) -> int:
        self.flush(pos)
        count, pos = read_uvarint(self.buf, pos, end, "tag count")
        kept: list[bytes] = []
        for _ in range(count):
            tag, pos = read_uvarint(self.buf, pos, end, "tag")
            size, pos = read_uvarint(self.buf, pos, end, f"tag {tag} size")
            need(end, pos, size, f"tag {tag} value")
            known = shape.tagged.get(tag)
            if known is not None:
                value = self.tag_value(known, self.buf[pos : pos + size], self.copy)
                kept.append(uvarint(tag) + uvarint(len(value)) + value)
            pos += size
        if self.copy:
            self.out.append(uvarint(len(kept)) + b"".join(kept))
        self.mark = pos
        return pos

    @staticmethod
    def tag_value(field: FieldShape, raw: memoryview, copy: bool) -> bytes:
        """A known tag's value; structs inside it get their own unknown tags removed."""
        if field.kind is not Kind.ENTITY:
            return bytes(raw) if copy else b""
        nested = _Rewriter(raw, copy)
        end = nested.field(field, True, 0, len(raw), in_tag=True)
        nested.flush(end)
        return b"".join(nested.out)
