"""The wire shape of kio's entity classes, derived once per class from their field metadata.

kio describes every message as frozen dataclasses: field order is wire order, metadata carries
the Kafka type (`kafka_type`) and, for tagged fields, the tag; `X | None` marks nullable values
and `tuple[X, ...]` arrays. The hand-written walkers here (unknown-tag skipping, null checks,
the Fetch encoder's tagged fields) read that through `shape_of` instead of re-deriving it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, Union, get_args, get_origin

__all__ = ["FIXED_SIZES", "EntityShape", "FieldShape", "Kind", "shape_of"]

# Bytes on the wire for each fixed-width kio type.
FIXED_SIZES: Mapping[str, int] = MappingProxyType(
    {
        "bool": 1,
        "int8": 1,
        "uint8": 1,
        "int16": 2,
        "uint16": 2,
        "error_code": 2,
        "int32": 4,
        "uint32": 4,
        "timedelta_i32": 4,
        "int64": 8,
        "uint64": 8,
        "float64": 8,
        "timedelta_i64": 8,
        "datetime_i64": 8,
        "uuid": 16,
    }
)


class Kind(Enum):
    """How a value is laid out: fixed width, length-prefixed text/bytes, or a nested struct."""

    FIXED = "fixed"
    STRING = "string"  # int16 length (legacy) or uvarint length+1 (compact)
    BYTES = "bytes"  # int32 length (legacy) or uvarint length+1 (compact); also "records"
    ENTITY = "entity"


@dataclass(frozen=True, slots=True)
class FieldShape:
    """One field. `size` is set for FIXED, `entity` for ENTITY; `tag` only for tagged fields."""

    name: str
    kind: Kind
    is_array: bool
    nullable: bool
    size: int = 0
    entity: type | None = None
    tag: int | None = None


@dataclass(frozen=True, slots=True)
class EntityShape:
    """An entity class: untagged fields in wire order, tagged fields by tag number."""

    entity_type: type
    flexible: bool
    fields: tuple[FieldShape, ...]
    tagged: Mapping[int, FieldShape]


@functools.cache
def shape_of(entity_type: type) -> EntityShape:
    """The wire shape of a kio entity class (cached)."""
    untagged: list[FieldShape] = []
    tagged: dict[int, FieldShape] = {}
    for field in dataclasses.fields(entity_type):
        shape = _field_shape(field)
        if shape.tag is None:
            untagged.append(shape)
        else:
            tagged[shape.tag] = shape
    return EntityShape(
        entity_type=entity_type,
        flexible=bool(entity_type.__flexible__),
        fields=tuple(untagged),
        tagged=MappingProxyType(tagged),
    )


def _field_shape(field: dataclasses.Field[Any]) -> FieldShape:
    value_type, nullable = _strip_optional(field.type)
    is_array = get_origin(value_type) is tuple
    if is_array:
        value_type, nullable_item = _strip_optional(get_args(value_type)[0])
        nullable = nullable or nullable_item
    tag = field.metadata.get("tag")
    if dataclasses.is_dataclass(value_type):
        return FieldShape(field.name, Kind.ENTITY, is_array, nullable, entity=value_type, tag=tag)
    kafka_type = field.metadata["kafka_type"]
    if kafka_type in FIXED_SIZES:
        size = FIXED_SIZES[kafka_type]
        return FieldShape(field.name, Kind.FIXED, is_array, nullable, size=size, tag=tag)
    kind = Kind.STRING if kafka_type == "string" else Kind.BYTES
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"unknown kafka_type {kafka_type!r} on {field.name}")
    return FieldShape(field.name, kind, is_array, nullable, tag=tag)


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); anything else -> (itself, False)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False
