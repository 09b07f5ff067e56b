"""How the codec reads a metadata record or struct type at one version: its untagged fields in
schema order, with each run of fixed-width fields read by one `struct` unpack, and its tagged
fields by tag. Plans are built once per (type, version) and cached.

The plan only speeds up reading what is well formed: a run whose bytes are cut short or hold a
boolean other than 0 or 1 is read again field by field, which raises the precise error. For a
record made only of fixed-width fields and arrays of int32s or UUIDs (the partition records, which
are nearly all of a large metadata log), the plan also has `fast`: one function that reads the
whole record, or answers None for anything unusual (a cut, a varint longer than a byte, a size
that does not add up), so that the codec's field-by-field reader reads it again and raises the
precise error.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from spark_log.protocol.wire import uuid_of

from .records import ZERO_UUID
from .schema import FieldSpec, Wire, fields_of

__all__ = ["NUMBERS", "FixedRun", "ReadPlan", "int32_array", "int32s", "read_plan"]

# Fixed-width Kafka types and their struct codes ("bool" is read as a byte and checked).
_CODES = {"bool": "B", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
          "uuid": "16s"}
_ZERO_BYTES = bytes(16)


@dataclass(frozen=True, slots=True)
class FixedRun:
    """Consecutive untagged fixed-width scalar fields. Invariant: `unpack` reads exactly
    `size` bytes, one value per spec, in order."""

    specs: tuple[FieldSpec, ...]
    unpack: struct.Struct
    size: int
    kinds: tuple[str, ...]
    plain: bool  # numbers only: the unpacked values are the field values
    names: tuple[str, ...]  # of the specs

    def values(self, buf: memoryview, pos: int) -> tuple[object, ...] | None:
        """The run's values at `pos`, or None if the bytes do not hold them well formed."""
        if pos + self.size > len(buf):
            return None
        raw = self.unpack.unpack_from(buf, pos)
        if self.plain:
            return raw
        out = []
        for kind, value in zip(self.kinds, raw, strict=True):
            if kind == "uuid":
                value = _uuid(value)
            elif kind == "bool":
                if value > 1:
                    return None
                value = value == 1
            out.append(value)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """Steps (a FixedRun or a single untagged field) in schema order, and the tagged fields of
    the version by tag."""

    steps: tuple[FixedRun | FieldSpec, ...]
    tagged: dict[int, FieldSpec]
    # The whole struct read from a position to the end of the buffer, or None (see above).
    fast: Callable[[memoryview, int], Any] | None = None


@functools.cache
def read_plan(struct_type: type, version: int) -> ReadPlan:
    specs = [spec for spec in fields_of(struct_type) if spec.wire.since <= version]
    steps: list[FixedRun | FieldSpec] = []
    run: list[FieldSpec] = []
    for spec in specs:
        if spec.wire.tag is not None:
            continue
        if not spec.wire.array and spec.wire.item in _CODES:
            run.append(spec)
            continue
        steps.extend(_close(run))
        run = []
        steps.append(spec)
    steps.extend(_close(run))
    tagged = {spec.wire.tag: spec for spec in specs if spec.wire.tag is not None}
    return ReadPlan(tuple(steps), tagged, _fast_reader(struct_type, steps, tagged))


def _close(run: list[FieldSpec]) -> list[FixedRun | FieldSpec]:
    if not run:
        return []
    kinds = tuple(spec.wire.item or "" for spec in run)
    unpack = struct.Struct(">" + "".join(_CODES[kind] for kind in kinds))
    plain = not any(kind in ("uuid", "bool") for kind in kinds)
    return [FixedRun(tuple(run), unpack, unpack.size, kinds, plain,
                     tuple(spec.name for spec in run))]


def _uuid(raw: bytes) -> UUID:
    # One object per id (building UUIDs was the largest single cost of decoding a start's
    # metadata log); the unassigned id is the ZERO_UUID object itself.
    return ZERO_UUID if raw == _ZERO_BYTES else uuid_of(raw)


@functools.lru_cache(maxsize=256)
def int32s(count: int) -> struct.Struct:
    """The struct of `count` big-endian int32s (cached; `write_plan` packs with it too)."""
    return struct.Struct(f">{count}i")


def int32_array(buf: memoryview, pos: int, count: int) -> tuple[int, ...] | None:
    """`count` int32s at `pos`, or None if the bytes left cannot hold them."""
    if pos + 4 * count > len(buf):
        return None
    return int32s(count).unpack_from(buf, pos)


# ---- the fast reader ------------------------------------------------------------------------
# A field reader takes (buf, pos, end) and answers (value, position after it), or None when the
# bytes are not the well-formed value.
_FieldReader = Callable[[memoryview, int, int], "tuple[Any, int] | None"]
# The struct of each fixed-width number type (`write_plan` packs with them too).
NUMBERS = {kind: struct.Struct(">" + code) for kind, code in _CODES.items()
           if kind not in ("bool", "uuid")}


def _fast_reader(struct_type: type, steps: list[FixedRun | FieldSpec],
                 tagged: dict[int, FieldSpec]) -> Callable[[memoryview, int], Any] | None:
    """The whole-struct reader, if every field is of a kind it reads (else None)."""
    untagged: list[tuple[FixedRun | str, _FieldReader | None]] = []
    for step in steps:
        if type(step) is FixedRun:
            untagged.append((step, None))
            continue
        reader = _field_reader(step.wire)  # type: ignore[union-attr]
        if reader is None:
            return None
        untagged.append((step.name, reader))  # type: ignore[union-attr]
    by_tag: dict[int, tuple[str, _FieldReader]] = {}
    for tag, spec in tagged.items():
        reader = _field_reader(spec.wire)
        if reader is None:
            return None
        by_tag[tag] = (spec.name, reader)

    def read(buf: memoryview, pos: int) -> Any:
        end = len(buf)
        values: dict[str, Any] = {}
        for step, reader in untagged:
            if reader is None:
                run: FixedRun = step  # type: ignore[assignment]
                raw = run.values(buf, pos)
                if raw is None:
                    return None
                values.update(zip(run.names, raw, strict=True))
                pos += run.size
                continue
            got = reader(buf, pos, end)
            if got is None:
                return None
            values[step], pos = got  # type: ignore[index]
        if pos >= end or buf[pos] >= 0x80:
            return None
        count, pos = buf[pos], pos + 1
        for _ in range(count):
            if pos + 2 > end or buf[pos] >= 0x80 or buf[pos + 1] >= 0x80:
                return None
            stop = pos + 2 + buf[pos + 1]
            if stop > end:
                return None
            field = by_tag.get(buf[pos])
            if field is not None:
                got = field[1](buf, pos + 2, stop)
                if got is None or got[1] != stop:
                    return None
                values[field[0]] = got[0]
            pos = stop
        return struct_type(**values) if pos == end else None

    return read


def _field_reader(wire: Wire) -> _FieldReader | None:
    if not wire.array:
        scalar = NUMBERS.get(wire.item or "")
        if scalar is None:
            return None

        def read_scalar(buf: memoryview, pos: int, end: int) -> tuple[Any, int] | None:
            after = pos + scalar.size
            return (scalar.unpack_from(buf, pos)[0], after) if after <= end else None

        return read_scalar
    if wire.item not in ("int32", "uuid"):
        return None
    width = 4 if wire.item == "int32" else 16
    nullable = wire.nullable

    def read_array(buf: memoryview, pos: int, end: int) -> tuple[Any, int] | None:
        if pos >= end or buf[pos] >= 0x80:
            return None
        count = buf[pos] - 1
        if count < 0:
            return (None, pos + 1) if nullable else None
        after = pos + 1 + width * count
        if after > end:
            return None
        if width == 4:
            return int32s(count).unpack_from(buf, pos + 1), after
        return tuple(_uuid(bytes(buf[at : at + 16])) for at in range(pos + 1, after, 16)), after

    return read_array
