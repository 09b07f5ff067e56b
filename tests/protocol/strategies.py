"""Hypothesis strategies for kio entities of any API and version, built from their wire shape.

Values are chosen to survive a wire round trip unchanged: timedeltas in whole milliseconds,
UTC datetimes, finite floats, and UUIDs that are either None or non-zero (kio reads the zero UUID
back as None).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.schema import FieldShape, Kind, shape_of

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def all_messages() -> list[tuple[int, int]]:
    """Every (api key, version) the table accepts, topic-ID versions included."""
    return [
        (key, version)
        for key, spec in sorted(API_TABLE.items())
        for version in range(spec.min_version, spec.topic_id_max_version + 1)
    ]


@functools.cache
def entities(entity_type: type) -> st.SearchStrategy[Any]:
    """Instances of a kio entity class with every field drawn to match its Kafka type."""
    fields = {field.name: field for field in dataclasses.fields(entity_type)}
    shape = shape_of(entity_type)
    kwargs = {
        shape_field.name: _field(shape_field, fields[shape_field.name].metadata)
        for shape_field in (*shape.fields, *shape.tagged.values())
    }
    return st.builds(entity_type, **kwargs)


def _field(shape: FieldShape, metadata: Any) -> st.SearchStrategy[Any]:
    value = _value(shape, metadata)
    if shape.is_array:
        strategy = st.lists(value, max_size=2).map(tuple)
        return st.none() | strategy if shape.nullable else strategy
    # kio writes tags as present values; a null uuid is written as zeros (drawn in `_fixed`).
    nullable_value = shape.nullable and shape.tag is None and metadata.get("kafka_type") != "uuid"
    return st.none() | value if nullable_value else value


def _value(shape: FieldShape, metadata: Any) -> st.SearchStrategy[Any]:
    if shape.kind is Kind.ENTITY:
        assert shape.entity is not None
        return st.deferred(lambda: entities(shape.entity))
    if shape.kind is Kind.STRING:
        return st.text(max_size=8)
    if shape.kind is Kind.BYTES:
        return st.binary(max_size=16)
    return _fixed(metadata["kafka_type"])


def _fixed(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        low, high = _INTS[kafka_type]
        return st.integers(low, high)
    millis_i32 = st.integers(-(2**31), 2**31 - 1)
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "error_code": st.sampled_from(ErrorCode),
        "uuid": st.none() | st.uuids().filter(lambda u: u.int != 0),
        "timedelta_i32": millis_i32.map(lambda ms: datetime.timedelta(milliseconds=ms)),
        "timedelta_i64": st.integers(-(2**40), 2**40).map(
            lambda ms: datetime.timedelta(milliseconds=ms)
        ),
        "datetime_i64": st.integers(0, 2**40).map(
            lambda ms: _EPOCH + datetime.timedelta(milliseconds=ms)
        ),
    }
    return strategies[kafka_type]
