"""The Avro options of reads and writes (`valueFormat`, `keyFormat`, the schemas, schema ids and
`avroWireFormat`), checked on the driver: a bad schema fails before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import PylogOptionError
from .option_values import get_option, parse_positive_int

AVRO_OPTIONS = ("valueFormat", "keyFormat", "avroSchema", "valueAvroSchema", "keyAvroSchema",
                "avroSchemaId", "keyAvroSchemaId", "avroWireFormat")


@dataclass(frozen=True)
class AvroOptions:
    """How keys and values are encoded: raw bytes, or Avro (schemaless or Confluent framed)."""

    value_format: str = "raw"
    key_format: str = "raw"
    value_schema: str | None = None
    key_schema: str | None = None
    value_schema_id: int | None = None
    key_schema_id: int | None = None
    wire_format: str = "auto"


def parse_avro(options: Mapping[str, str]) -> AvroOptions:
    fmt = {}
    for name in ("valueFormat", "keyFormat"):
        value = (get_option(options, name) or "raw").strip().lower()
        if value not in ("raw", "avro"):
            raise PylogOptionError(f"Option '{name}' must be 'raw' or 'avro', got {value!r}")
        fmt[name] = value
    value_schema = get_option(options, "avroSchema")
    alias = get_option(options, "valueAvroSchema")
    if value_schema is not None and alias is not None and alias != value_schema:
        raise PylogOptionError("Give only one of 'avroSchema' and 'valueAvroSchema'.")
    value_schema = value_schema or alias
    key_schema = get_option(options, "keyAvroSchema")
    for name, schema, what in (("valueFormat", value_schema, "avroSchema"),
                               ("keyFormat", key_schema, "keyAvroSchema")):
        if fmt[name] == "avro" and not schema:
            raise PylogOptionError(
                f"Option '{name}' is 'avro' but '{what}' is not set: give the Avro schema (JSON)")
    wire = (get_option(options, "avroWireFormat") or "auto").strip().lower()
    if wire not in ("auto", "raw", "confluent"):
        raise PylogOptionError(
            f"Option 'avroWireFormat' must be 'auto', 'raw' or 'confluent', got {wire!r}")
    avro = AvroOptions(
        value_format=fmt["valueFormat"], key_format=fmt["keyFormat"],
        value_schema=value_schema, key_schema=key_schema,
        value_schema_id=parse_positive_int(options, "avroSchemaId", minimum=0),
        key_schema_id=parse_positive_int(options, "keyAvroSchemaId", minimum=0),
        wire_format=wire,
    )
    check_schemas(avro)
    return avro


def check_schemas(avro: AvroOptions) -> None:
    """Parse the schemas once on the driver, so a bad schema fails before any job."""
    from .avro import parse_schema, spark_type

    if avro.value_format == "avro":
        spark_type(parse_schema(avro.value_schema or "", "avroSchema"))
    if avro.key_format == "avro":
        spark_type(parse_schema(avro.key_schema or "", "keyAvroSchema"))
