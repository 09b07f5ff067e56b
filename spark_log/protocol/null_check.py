"""Rejecting null where Kafka's schema forbids it, which kio's reader lets through for arrays.

kio reads a length of -1 as None even for arrays the schema marks non-nullable; Kafka's
generated readers refuse such a message ("non-nullable field ... was serialized as null").
Handlers iterate these arrays, so a decoded request is checked here before it reaches them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .errors import ProtocolError
from .schema import Kind, shape_of

__all__ = ["check_non_null"]


@dataclass(frozen=True, slots=True)
class _Check:
    """One field worth visiting: a non-nullable array and/or structs that contain one."""

    name: str
    is_array: bool
    nullable: bool
    entity: type | None  # set when the field holds structs that need checking themselves


def check_non_null(entity: object) -> None:
    """Raise `ProtocolError` if any non-nullable array in `entity` (recursively) is None."""
    for check in _checks(type(entity)):
        value = getattr(entity, check.name)
        if value is None:
            if check.is_array and not check.nullable:
                raise ProtocolError(
                    f"non-nullable field {type(entity).__name__}.{check.name} was null"
                )
            continue
        if check.entity is None:
            continue
        if check.is_array:
            for item in value:
                check_non_null(item)
        else:
            check_non_null(value)


@functools.cache
def _checks(entity_type: type) -> tuple[_Check, ...]:
    found = []
    for field in (*shape_of(entity_type).fields, *shape_of(entity_type).tagged.values()):
        nested = field.entity if field.kind is Kind.ENTITY else None
        if nested is not None and not _checks(nested):
            nested = None
        if nested is not None or (field.is_array and not field.nullable):
            found.append(_Check(field.name, field.is_array, field.nullable, nested))
    return tuple(found)
