"""How the codec reads a metadata record or struct type at one version: its untagged fields in
schema order, with each run of fixed-width fields read by one `struct` unpack, and its tagged
fields by tag. Plans are built once per (type, version) and cached.

The plan only speeds up reading what is well formed: a run whose bytes are cut short or hold a
boolean other than 0 or 1 is read again field by field, which raises the precise error.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from uuid import UUID

from spark_log.protocol.wire import uuid_of

from .records import ZERO_UUID
from .schema import FieldSpec, fields_of

__all__ = ["FixedRun", "ReadPlan", "int32_array", "read_plan"]

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
    return ReadPlan(tuple(steps), tagged)


def _close(run: list[FieldSpec]) -> list[FixedRun | FieldSpec]:
    if not run:
        return []
    kinds = tuple(spec.wire.item or "" for spec in run)
    unpack = struct.Struct(">" + "".join(_CODES[kind] for kind in kinds))
    plain = not any(kind in ("uuid", "bool") for kind in kinds)
    return [FixedRun(tuple(run), unpack, unpack.size, kinds, plain)]


def _uuid(raw: bytes) -> UUID:
    # One object per id (building UUIDs was the largest single cost of decoding a start's
    # metadata log); the unassigned id is the ZERO_UUID object itself.
    return ZERO_UUID if raw == _ZERO_BYTES else uuid_of(raw)


@functools.lru_cache(maxsize=256)
def _int32s(count: int) -> struct.Struct:
    return struct.Struct(f">{count}i")


def int32_array(buf: memoryview, pos: int, count: int) -> tuple[int, ...] | None:
    """`count` int32s at `pos`, or None if the bytes left cannot hold them."""
    if pos + 4 * count > len(buf):
        return None
    return _int32s(count).unpack_from(buf, pos)
