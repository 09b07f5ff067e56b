"""How a metadata record's fields sit on the wire: the part of Kafka's JSON message schemas
(`metadata/src/main/resources/common/metadata/*.json`) that the codec needs.

A record class is a frozen dataclass whose fields are declared with `wire(...)`: the Kafka type,
the first version that has the field, its tag if it is a tagged field, whether it may be null,
and Kafka's default. Declaration order is the schema's order; untagged fields are written in it,
tagged ones by tag number. Every metadata record is a flexible message in all its versions.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

__all__ = ["PRIMITIVE_TYPES", "FieldSpec", "Wire", "fields_of", "wire"]

# The scalar Kafka types metadata records use.
PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uuid", "string"}
)

_KEY = "metadata_wire"


@dataclass(frozen=True, slots=True)
class Wire:
    """One field's wire description. `item` is the scalar type, or None for an array of
    `struct`. In these schemas a field is nullable and tagged in every version that has it."""

    item: str | None
    array: bool = False
    struct: type | None = None
    since: int = 0
    tag: int | None = None
    nullable: bool = False

    def describe(self) -> str:
        name = self.item if self.struct is None else self.struct.__name__
        return f"[]{name}" if self.array else str(name)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A record field: its Python name, wire description and Kafka default."""

    name: str
    wire: Wire
    default: Any


def wire(
    kafka_type: str,
    default: Any,
    *,
    struct: type | None = None,
    since: int = 0,
    tag: int | None = None,
    nullable: bool = False,
) -> Any:
    """A dataclass field of `kafka_type` ("int32", "[]int32", "[]uuid", "[]struct" with
    `struct`) holding `default` unless set."""
    array = kafka_type.startswith("[]")
    item = kafka_type[2:] if array else kafka_type
    if item == "struct":
        if struct is None or not array:
            raise TypeError("a struct field is an array of `struct`")
        spec = Wire(None, True, struct, since, tag, nullable)
    elif item in PRIMITIVE_TYPES:
        spec = Wire(item, array, None, since, tag, nullable)
    else:
        raise TypeError(f"unknown Kafka type {kafka_type!r}")
    return dataclasses.field(default=default, metadata={_KEY: spec})


@functools.cache
def fields_of(record_type: type) -> tuple[FieldSpec, ...]:
    """The wire fields of a record or struct class, in declaration order (cached)."""
    specs = []
    for field in dataclasses.fields(record_type):
        spec = field.metadata.get(_KEY)
        if spec is None:
            raise TypeError(f"{record_type.__name__}.{field.name} has no wire description")
        specs.append(FieldSpec(field.name, spec, field.default))
    return tuple(specs)
