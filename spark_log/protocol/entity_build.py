"""Build a version-specific kio entity from plain, version-independent values.

kio generates one set of dataclasses per message version (`MetadataResponseTopic` of v9 is not
the one of v12). Handlers describe a response once, as nested dicts/lists of plain ints, strings
and bytes; `build(ResponseClass, value)` keeps the fields that version has, drops the ones it does
not, fills defaults, and turns millisecond ints into the timedeltas and datetimes kio expects
(-1, Kafka's "no timestamp", becomes None). A required field
missing from `value` raises `KeyError` naming it, so a handler bug shows as a clear error.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

_Converter = Callable[[Any], Any]


def build(cls: type, value: Mapping[str, Any] | Any) -> Any:
    """Entity of type `cls` from a mapping (or an object with attributes) of field values."""
    if isinstance(value, cls):
        return value
    get = value.get if isinstance(value, Mapping) else lambda name, d: getattr(value, name, d)
    kwargs = {}
    for name, convert, required in _plan(cls):
        item = get(name, _MISSING)
        if item is _MISSING:
            if required:
                raise KeyError(f"{cls.__qualname__} v{cls.__version__} needs field {name!r}")
            continue
        kwargs[name] = convert(item)
    return cls(**kwargs)


def ms(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (request timeouts, session timeouts)."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


_MISSING = object()


@cache
def _plan(cls: type) -> tuple[tuple[str, _Converter, bool], ...]:
    plan = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, _converter(f.type), required))
    return tuple(plan)


def _converter(tp: Any) -> _Converter:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            convert = _converter(inner[0])
            if convert is _to_datetime:
                return _to_datetime
            return lambda v: None if v is None else convert(v)
        return _identity
    origin = typing.get_origin(tp)
    if origin is tuple:
        element = _converter(typing.get_args(tp)[0])
        if element is _identity:
            return tuple
        return lambda v: tuple(element(e) for e in v)
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return lambda v: build(tp, v)
        if issubclass(tp, datetime.timedelta):
            return _to_timedelta
        if issubclass(tp, datetime.datetime):
            return _to_datetime
        if issubclass(tp, enum.Enum):  # ErrorCode: handlers pass plain ints
            return tp
    return _identity


def _identity(value: Any) -> Any:
    return value


def _to_datetime(value: Any) -> datetime.datetime | None:
    """Epoch milliseconds to an aware datetime; Kafka's -1 ("none") to None."""
    if isinstance(value, datetime.datetime) or value is None:
        return value
    if value < 0:
        return None
    return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)


def _to_timedelta(value: Any) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)
