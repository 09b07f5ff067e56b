"""How the codec writes a record type at one version in one pass, when it can: the twin of
`read_plan`'s fast reader. For a record made only of fixed-width numbers, UUIDs and arrays of
int32s or UUIDs, tagged or not (the partition records, which are nearly all of what a controller
writes: 10,000 of them when a broker of 10,000 partitions starts or stops), `write_plan` gives
one function that builds the value's bytes, or answers None for anything unusual: a value of
another type (a bool, an int subclass, a list of something else), a number out of range, a
field the version lacks set to other than its default. The codec's schema walk then writes it,
or raises the precise error, so the bytes and the errors are the walk's in every case.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable
from typing import Any
from uuid import UUID

from spark_log.protocol.wire import uvarint

from .read_plan import NUMBERS, int32s
from .schema import FieldSpec, fields_of

__all__ = ["write_plan"]

# (value) -> its bytes, or None when the value is not one the fast writer writes
_ValueWriter = Callable[[Any], "bytes | None"]
_NULL = b"\x00"  # a null compact array: length 0


@functools.cache
def write_plan(record_type: type, version: int) -> Callable[[Any], bytes | None] | None:
    """The one-pass writer of `record_type` at `version` (frame and type header included), or
    None if a field is of a kind it does not write."""
    header = uvarint(1) + uvarint(record_type.API_KEY) + uvarint(version)
    absent: list[tuple[str, Any]] = []  # fields the version lacks: they must hold the default
    untagged: list[tuple[str, _ValueWriter]] = []
    tagged: list[tuple[int, str, Any, _ValueWriter]] = []
    for spec in fields_of(record_type):
        if spec.wire.since > version:
            absent.append((spec.name, spec.default))
            continue
        writer = _value_writer(spec)
        if writer is None:
            return None
        if spec.wire.tag is None:
            untagged.append((spec.name, writer))
        else:
            tagged.append((spec.wire.tag, spec.name, spec.default, writer))
    tagged.sort(key=lambda entry: entry[0])
    names = [name for name, _ in absent] + [name for name, _ in untagged] + \
        [name for _, name, _, _ in tagged]
    values_of = operator.attrgetter(*names) if len(names) > 1 else \
        (lambda record: tuple(getattr(record, name) for name in names))  # attrgetter: no tuple
    defaults = tuple(default for _, default in absent)
    writers = [writer for _, writer in untagged]
    # (its bytes as a tag, its default, whether that is None, its writer), by tag
    tags = [(uvarint(tag), default, default is None, writer)
            for tag, _, default, writer in tagged]
    split = len(absent) + len(untagged)

    def write(record: Any) -> bytes | None:
        values = values_of(record)
        if values[:len(defaults)] != defaults:
            return None
        out = [header]
        for writer, value in zip(writers, values[len(defaults):split], strict=True):
            data = writer(value)
            if data is None:
                return None
            out.append(data)
        fields = []
        for (tag, default, none, writer), value in zip(tags, values[split:], strict=True):
            if (value is not None) if none else (value != default):
                data = writer(value)
                if data is None:
                    return None
                fields += (tag, uvarint(len(data)), data)
        out.append(uvarint(len(fields) // 3))
        return b"".join(out + fields)

    return write


def _value_writer(spec: FieldSpec) -> _ValueWriter | None:
    wire = spec.wire
    if not wire.array:
        if wire.item == "uuid":
            return _uuid
        packer = NUMBERS.get(wire.item or "")
        return None if packer is None else _number(packer)
    if wire.item == "int32":
        return _array(wire.nullable, int, _pack_int32s)
    if wire.item == "uuid":
        return _array(wire.nullable, UUID, _pack_uuids)
    return None


def _uuid(value: Any) -> bytes | None:
    return value.bytes if type(value) is UUID else None


def _number(packer: struct.Struct) -> _ValueWriter:
    def write(value: Any) -> bytes | None:
        if type(value) is not int:  # a bool or an int subclass: the schema walk decides
            return None
        try:
            return packer.pack(value)
        except struct.error:  # out of range
            return None

    return write


def _array(nullable: bool, item_type: type, pack: Callable[[Any], bytes]) -> _ValueWriter:
    """A compact array of `item_type` items, written by `pack` after its length."""
    def write(value: Any) -> bytes | None:
        if value is None:
            return _NULL if nullable else None
        if type(value) not in (tuple, list) or any(type(item) is not item_type
                                                   for item in value):
            return None
        try:
            return uvarint(len(value) + 1) + pack(value)
        except struct.error:  # a number out of range
            return None

    return write


def _pack_int32s(values: Any) -> bytes:
    return int32s(len(values)).pack(*values)


def _pack_uuids(values: Any) -> bytes:
    return b"".join(item.bytes for item in values)
