"""Hypothesis strategies for metadata records of any type and version, drawn from their wire
schema: every field a version has gets a value of its Kafka type (nulls where the schema allows
them), fields the version lacks keep Kafka's default, so each drawn record survives a round trip
at that version unchanged."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import strategies as st

from spark_log.metadata.records import RECORD_TYPES, ZERO_UUID
from spark_log.metadata.schema import FieldSpec, fields_of

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}


def all_record_versions() -> list[tuple[type, int]]:
    """Every (record type, version) the codec knows."""
    return [(record_type, version)
            for _key, record_type in sorted(RECORD_TYPES.items())
            for version in range(record_type.HIGHEST_VERSION + 1)]


def for_every_record_version(test: Any) -> Any:
    """Run `test(record_type, version, ...)` once for each (record type, version)."""
    return pytest.mark.parametrize(
        ("record_type", "version"), all_record_versions(),
        ids=lambda value: getattr(value, "__name__", str(value)))(test)


@functools.cache
def records(record_type: type, version: int) -> st.SearchStrategy[Any]:
    """Instances of a record (or nested struct) class as `version` can hold them."""
    kwargs = {spec.name: _field(spec, version)
              for spec in fields_of(record_type) if spec.wire.since <= version}
    return st.builds(record_type, **kwargs)


def any_record() -> st.SearchStrategy[tuple[Any, int]]:
    """(record, version) for any record type and version."""
    return st.sampled_from(all_record_versions()).flatmap(
        lambda pair: st.tuples(records(*pair), st.just(pair[1])))


def _field(spec: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    wire = spec.wire
    if wire.array:
        struct = wire.struct
        item = (st.deferred(lambda: records(struct, version)) if struct is not None
                else _scalar(wire.item or ""))
        value = st.lists(item, max_size=3).map(tuple)
    else:
        value = _scalar(wire.item or "")
    return st.none() | value if wire.nullable else value


def _scalar(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        return st.integers(*_INTS[kafka_type])
    return {
        "bool": st.booleans(),
        "uuid": st.just(ZERO_UUID) | st.uuids(),
        "string": st.text(max_size=10),
    }[kafka_type]
