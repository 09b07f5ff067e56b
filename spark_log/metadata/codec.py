"""Metadata records <-> the bytes of a `__cluster_metadata` record value, as Kafka's
MetadataRecordSerde writes and reads them.

A value is: the frame version (1), the api key and the record version, each an unsigned varint,
then the record in Kafka's flexible encoding: fixed-width big-endian numbers, UUIDs as 16 bytes,
compact strings and arrays (unsigned varint length + 1, 0 for null), and after every struct a
tagged-field section (count, then tag, size and value of each tagged field that differs from
its default, by tag number). kio's primitive readers and writers do the values; this module
walks the schema (see `schema`). Reading skips tags it does not know, as Kafka does (Kafka keeps
them to write back; they are dropped here). Anything that does not decode raises
`RecordDecodeError` naming the record, the version and the field.
"""

from __future__ import annotations

import io
from typing import Any
from uuid import UUID

from kio.serial import readers, writers
from kio.static.primitive import uvarint as as_uvarint

from spark_log.protocol import ProtocolError
from spark_log.protocol.wire import read_compact_length, read_uvarint, uvarint

from .errors import RecordDecodeError, RecordEncodeError
from .read_plan import FixedRun, int32_array, read_plan
from .records import RECORD_TYPES, ZERO_UUID, MetadataRecord
from .schema import FieldSpec, Wire, fields_of
from .write_plan import write_plan

__all__ = [
    "FRAME_VERSION",
    "decode_record",
    "decode_record_and_version",
    "encode_record",
]

FRAME_VERSION = 1
_MAX_SHORT = 0x7FFF  # versions, api keys and string lengths are Java shorts
_MAX_STRING_SIZE = _MAX_SHORT + 3  # a string of 0x7fff bytes has a 3-byte length in front

_READERS: dict[str, Any] = {
    "bool": readers.read_boolean,
    "int8": readers.read_int8,
    "int16": readers.read_int16,
    "int32": readers.read_int32,
    "int64": readers.read_int64,
    "uint16": readers.read_uint16,
    "uuid": readers.read_uuid,
}
_WRITERS: dict[str, Any] = {
    "bool": writers.write_boolean,
    "int8": writers.write_int8,
    "int16": writers.write_int16,
    "int32": writers.write_int32,
    "int64": writers.write_int64,
    "uint16": writers.write_uint16,
    "uuid": writers.write_uuid,
    "string": writers.write_compact_string,
}
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "bool": bool, "int8": int, "int16": int, "int32": int, "int64": int, "uint16": int,
    "uuid": UUID, "string": str,
}


def encode_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """The record value bytes of `record` at `version` (default: the record's highest).

    Raises `RecordEncodeError` for a value out of range or of the wrong type, and for a value
    other than the default in a field `version` does not have.
    """
    record_type = type(record)
    if RECORD_TYPES.get(getattr(record_type, "API_KEY", -1)) is not record_type:
        raise RecordEncodeError(f"not a metadata record: {record!r}")
    if version is None:
        version = record_type.HIGHEST_VERSION
    if not 0 <= version <= record_type.HIGHEST_VERSION:
        raise RecordEncodeError(f"{record_type.__name__} has no version {version} "
                                f"(0-{record_type.HIGHEST_VERSION})")
    fast = write_plan(record_type, version)
    data = None if fast is None else fast(record)
    return _encode_by_schema(record, version) if data is None else data


def _encode_by_schema(record: MetadataRecord, version: int) -> bytes:
    """`encode_record` by walking the schema field by field (every record, every error)."""
    record_type = type(record)
    out = io.BytesIO()
    out.write(uvarint(FRAME_VERSION) + uvarint(record_type.API_KEY) + uvarint(version))
    _write_struct(out, record, version, f"{record_type.__name__} v{version}")
    return out.getvalue()


def decode_record(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """The record in a `__cluster_metadata` record value."""
    return decode_record_and_version(data)[0]


def decode_record_and_version(data: bytes | bytearray | memoryview) -> tuple[MetadataRecord, int]:
    """The record in a `__cluster_metadata` record value, and the version it was written at.

    Raises `RecordDecodeError` for an unknown frame version, api key or version, a varint that
    does not end or exceeds its type, a value cut short, a null where the schema has none, a
    string that is not UTF-8, and bytes left after the record.
    """
    view = memoryview(data).cast("B")
    if len(view) > 3 and view[0] == FRAME_VERSION and view[1] < 0x80 and view[2] < 0x80:
        record_type = RECORD_TYPES.get(view[1])
        if record_type is not None and view[2] <= record_type.HIGHEST_VERSION:
            fast = read_plan(record_type, view[2]).fast
            record = None if fast is None else fast(view, 3)
            if record is not None:
                return record, view[2]
    frame, pos = _header_varint(view, 0, "frame version")
    if frame == 0:
        raise RecordDecodeError("frame version 0 (the KRaft preview of Kafka 2.8) is not "
                                "supported")
    if frame != FRAME_VERSION:
        raise RecordDecodeError(f"unknown frame version {frame} (only {FRAME_VERSION} is known)")
    api_key, pos = _header_varint(view, pos, "type")
    version, pos = _header_varint(view, pos, "version")
    record_type = RECORD_TYPES.get(api_key)
    if record_type is None:
        raise RecordDecodeError(f"unknown metadata record type {api_key}")
    name = f"{record_type.__name__} v{version}"
    if version > record_type.HIGHEST_VERSION:
        raise RecordDecodeError(f"unknown version {version} of {record_type.__name__} "
                                f"(0-{record_type.HIGHEST_VERSION} are known)")
    reader = _Reader(view, pos, name)
    record = reader.struct(record_type, version)
    if reader.pos != len(view):
        raise RecordDecodeError(f"{name}: {len(view) - reader.pos} byte(s) left after the record")
    return record, version


def _header_varint(view: memoryview, pos: int, what: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(view, pos, len(view), what)
    except ProtocolError as exc:
        raise RecordDecodeError(f"error while reading the {what}: {exc}") from None
    if value > _MAX_SHORT:
        raise RecordDecodeError(f"the {what} {value} is too large (above {_MAX_SHORT})")
    return value, pos


# ---- writing --------------------------------------------------------------------------------

def _write_struct(out: io.BytesIO, value: Any, version: int, where: str) -> None:
    tagged: list[tuple[FieldSpec, Any]] = []
    for spec in fields_of(type(value)):
        field_value = getattr(value, spec.name)
        if spec.wire.since > version:
            if field_value != spec.default:
                raise RecordEncodeError(f"{where} has no field {spec.name}: it must be "
                                        f"{spec.default!r}, not {field_value!r}")
        elif spec.wire.tag is None:
            _write_field(out, spec, field_value, version, where)
        elif field_value != spec.default:
            tagged.append((spec, field_value))
    tagged.sort(key=lambda item: item[0].wire.tag or 0)
    writers.write_unsigned_varint(out, as_uvarint(len(tagged)))
    for spec, field_value in tagged:
        def write(buffer: Any, item: Any, spec: FieldSpec = spec) -> None:
            _write_field(buffer, spec, item, version, where)

        writers.write_tagged_field(out, as_uvarint(spec.wire.tag or 0), write, field_value)


def _write_field(out: Any, spec: FieldSpec, value: Any, version: int, where: str) -> None:
    wire = spec.wire
    if value is None:
        if not wire.nullable:
            raise RecordEncodeError(f"{where}: {spec.name} may not be null")
        writers.write_unsigned_varint(out, as_uvarint(0))
        return
    if not wire.array:
        _write_scalar(out, wire, value, f"{where}: {spec.name}")
        return
    if not isinstance(value, (tuple, list)):
        raise RecordEncodeError(f"{where}: {spec.name} must be a sequence, not {value!r}")
    writers.write_compact_array_length(out, len(value))
    for index, item in enumerate(value):
        if wire.struct is None:
            _write_scalar(out, wire, item, f"{where}: {spec.name}[{index}]")
        elif type(item) is not wire.struct:
            raise RecordEncodeError(f"{where}: {spec.name}[{index}] must be a "
                                    f"{wire.struct.__name__}, not {item!r}")
        else:
            _write_struct(out, item, version, f"{where}: {spec.name}[{index}]")


def _write_scalar(out: Any, wire: Wire, value: Any, where: str) -> None:
    kafka_type = wire.item or ""
    if not isinstance(value, _PYTHON_TYPES[kafka_type]) or (
            kafka_type != "bool" and isinstance(value, bool)):
        raise RecordEncodeError(f"{where}: {value!r} is not a {kafka_type}")
    if kafka_type == "string" and len(value.encode("utf-8")) > _MAX_SHORT:
        raise RecordEncodeError(f"{where}: a string of more than {_MAX_SHORT} bytes")
    try:
        _WRITERS[kafka_type](out, value)
    except Exception as exc:  # struct.error and kio's range checks
        raise RecordEncodeError(f"{where}: {value!r} does not fit a {kafka_type}: {exc}") from None


# ---- reading --------------------------------------------------------------------------------

class _Reader:
    """Reads fields from `buf[pos:]`. Invariant: `pos` is the first byte not yet read; every
    read is checked against the end of `buf`."""

    __slots__ = ("buf", "name", "pos")

    def __init__(self, buf: memoryview, pos: int, name: str) -> None:
        self.buf = buf
        self.pos = pos
        self.name = name

    def fail(self, what: str, problem: object) -> RecordDecodeError:
        return RecordDecodeError(f"{self.name}: {what}: {problem} (at byte {self.pos})")

    def struct(self, struct_type: type, version: int) -> Any:
        plan = read_plan(struct_type, version)
        values: dict[str, Any] = {}
        for step in plan.steps:
            if type(step) is FixedRun:
                self.fixed_run(step, values, version)
            else:
                values[step.name] = self.field(step, version)
        for _ in range(self.uvarint("tag count")):
            tag = self.uvarint("tag")
            size = self.uvarint(f"size of tag {tag}")
            if size > len(self.buf) - self.pos:
                raise self.fail(f"tag {tag}", f"{size} bytes announced, "
                                f"{len(self.buf) - self.pos} left")
            spec = plan.tagged.get(tag)
            if spec is not None:
                values[spec.name] = self.tagged_field(spec, size, version)
            self.pos += size
        return struct_type(**values)

    def fixed_run(self, run: FixedRun, values: dict[str, Any], version: int) -> None:
        """The run's fields with one unpack; field by field (for the error) if malformed."""
        read = run.values(self.buf, self.pos)
        if read is None:
            for spec in run.specs:
                values[spec.name] = self.field(spec, version)
            return
        self.pos += run.size
        for spec, value in zip(run.specs, read, strict=True):
            values[spec.name] = value

    def tagged_field(self, spec: FieldSpec, size: int, version: int) -> Any:
        inner = _Reader(self.buf[: self.pos + size], self.pos, self.name)
        value = inner.field(spec, version)
        if inner.pos != self.pos + size:
            raise self.fail(spec.name, f"tagged value of {size} bytes holds "
                            f"{inner.pos - self.pos}")
        return value

    def field(self, spec: FieldSpec, version: int) -> Any:
        wire = spec.wire
        if not wire.array:
            return self.scalar(wire, spec.name)
        count = self.length(spec.name)
        if count is None:
            if not wire.nullable:
                raise self.fail(spec.name, "null where the schema has no null")
            return None
        if wire.struct is not None:
            return tuple(self.struct(wire.struct, version) for _ in range(count))
        if wire.item == "int32":
            numbers = int32_array(self.buf, self.pos, count)
            if numbers is not None:
                self.pos += 4 * count
                return numbers
        return tuple(self.scalar(wire, spec.name) for _ in range(count))

    def scalar(self, wire: Wire, name: str) -> Any:
        kafka_type = wire.item or ""
        if kafka_type == "string":
            return self.string(name, wire.nullable)
        try:
            value, size = _READERS[kafka_type](self.buf, self.pos)
        except Exception as exc:  # kio's DecodeError subclasses, ValueError for a bad bool
            raise self.fail(name, f"{type(exc).__name__}: {exc}") from None
        self.pos += size
        return ZERO_UUID if kafka_type == "uuid" and value is None else value

    def string(self, name: str, nullable: bool) -> str | None:
        read = readers.read_compact_string_nullable if nullable else readers.read_compact_string
        try:
            value, size = read(self.buf, self.pos)
        except Exception as exc:  # BufferUnderflow, UnexpectedNull, InvalidUnicode
            raise self.fail(name, f"{type(exc).__name__}: {exc}") from None
        if size > _MAX_STRING_SIZE:
            raise self.fail(name, f"a string of more than {_MAX_SHORT} bytes")
        self.pos += size
        return value

    def length(self, name: str) -> int | None:
        """An array's count (None for null), no larger than the bytes left could hold."""
        try:
            count, pos = read_compact_length(self.buf, self.pos, len(self.buf), f"{name} count")
        except ProtocolError as exc:
            raise self.fail(name, exc) from None
        if count > len(self.buf) - pos:
            raise self.fail(name, f"{count} elements announced, {len(self.buf) - pos} bytes left")
        self.pos = pos
        return None if count < 0 else count

    def uvarint(self, what: str) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, len(self.buf), what)
        except ProtocolError as exc:
            raise self.fail(what, exc) from None
        return value
