"""Avro keys and values (fastavro): schema -> Spark type, bytes <-> Python values.

On read, `keyFormat=avro` / `valueFormat=avro` decode the column into a struct (or the schema's
type) following Spark's `from_avro` type mapping. Values may be plain Avro binary or in the
Confluent wire format (magic byte 0, 4-byte big-endian schema id, then the Avro binary);
`avroWireFormat=auto` (the default) recognises the framing per record, `raw` and `confluent`
force one. On write, a struct column is encoded, framed the Confluent way when a schema id is
given (`avroSchemaId` / `keyAvroSchemaId`).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .errors import PylogOptionError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

MAGIC = 0
FRAME = struct.Struct(">bI")


def parse_schema(text: str, option: str) -> Any:
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, fastavro.schema.SchemaParseException, KeyError, TypeError) as e:
        raise PylogOptionError(f"Option '{option}' is not a valid Avro schema: {e}") from None


# ---- schema mapping ----------------------------------------------------------------------

_PRIMITIVE = {
    "boolean": "BooleanType", "int": "IntegerType", "long": "LongType", "float": "FloatType",
    "double": "DoubleType", "bytes": "BinaryType", "string": "StringType", "fixed": "BinaryType",
    "enum": "StringType",
}
_LOGICAL = {
    "timestamp-millis": "TimestampType", "timestamp-micros": "TimestampType",
    "local-timestamp-millis": "TimestampNTZType", "local-timestamp-micros": "TimestampNTZType",
    "date": "DateType", "uuid": "StringType",
}


def spark_type(schema: Any) -> DataType:
    """The Spark type of values of an (already parsed) Avro schema, like Spark's from_avro."""
    from pyspark.sql import types as T

    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return spark_type(branches[0])
        return T.StructType([T.StructField(f"member{i}", spark_type(s), True)
                             for i, s in enumerate(branches)])
    if isinstance(schema, str):
        return getattr(T, _PRIMITIVE[schema])()
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "decimal":
        return T.DecimalType(schema["precision"], schema.get("scale", 0))
    if logical in _LOGICAL:
        return getattr(T, _LOGICAL[logical])()
    if kind == "record":
        return T.StructType([T.StructField(f["name"], spark_type(f["type"]), True)
                             for f in schema["fields"]])
    if kind == "array":
        return T.ArrayType(spark_type(schema["items"]), True)
    if kind == "map":
        return T.MapType(T.StringType(), spark_type(schema["values"]), True)
    if isinstance(kind, list | dict):
        return spark_type(kind)
    return getattr(T, _PRIMITIVE[kind])()


# ---- decoding ----------------------------------------------------------------------------


def make_decoder(schema_text: str, wire_format: str,
                 option: str) -> Callable[[list[bytes | None]], list[Any]]:
    """A function from raw column values to decoded values (None stays None)."""
    import fastavro

    schema = parse_schema(schema_text, option)
    reader = fastavro.schemaless_reader

    def decode_one(data: bytes) -> Any:
        if wire_format == "raw":
            return reader(io.BytesIO(data), schema, None)
        if wire_format == "confluent" or _looks_framed(data):
            framed = _decode_framed(data, schema, reader, strict=wire_format == "confluent")
            if framed is not _NOT_FRAMED:
                return framed
        return reader(io.BytesIO(data), schema, None)

    def decode(values: list[bytes | None]) -> list[Any]:
        return [None if v is None else decode_one(v) for v in values]

    return decode


_NOT_FRAMED = object()


def _looks_framed(data: bytes) -> bool:
    return len(data) >= FRAME.size and data[0] == MAGIC


def _decode_framed(data: bytes, schema: Any, reader: Any, *, strict: bool) -> Any:
    if not _looks_framed(data):
        raise ValueError("value is not in the Confluent wire format (no magic byte 0)")
    buf = io.BytesIO(data)
    buf.seek(FRAME.size)
    try:
        value = reader(buf, schema, None)
    except Exception:
        if strict:
            raise
        return _NOT_FRAMED
    if not strict and buf.tell() != len(data):
        return _NOT_FRAMED
    return value


# ---- encoding ----------------------------------------------------------------------------


def make_encoder(schema_text: str, schema_id: int | None,
                 option: str) -> Callable[[Iterable[Any]], list[bytes | None]]:
    """A function from Python values (dicts for records) to Avro bytes, framed when an id is
    given."""
    import fastavro

    schema = parse_schema(schema_text, option)
    writer = fastavro.schemaless_writer
    prefix = FRAME.pack(MAGIC, schema_id) if schema_id is not None else b""

    def encode(values: Iterable[Any]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for value in values:
            if value is None:
                out.append(None)
                continue
            buf = io.BytesIO()
            buf.write(prefix)
            writer(buf, schema, value)
            out.append(buf.getvalue())
        return out

    return encode
