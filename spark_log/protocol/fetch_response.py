"""The Fetch response, written without copying record bytes.

`encode_fetch_response` takes a kio FetchResponse entity of any version 4-18 whose `records`
fields may hold the caller's own objects (anything with an int `size`, such as a file slice the
server sends with `os.sendfile`, or plain bytes) and returns the frame as a list of parts:
`bytes` for everything we write, and each non-empty records object itself, in place. The size
prefix at the start of the first part counts all parts. Concatenating the parts, with each
records object replaced by its bytes, gives exactly what kio's writer would produce.

`encode_plain_fetch_response` writes the same parts straight from plain values (the fetch
handler's dicts) for the answer every consumer gets round after round: no tagged field set
anywhere (no current leader, diverging epoch or snapshot id in a partition, no node endpoints).
It skips building the kio entity, which cost as much as the encoding itself.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from .codec import encode_entity
from .errors import EncodeError
from .framing import SIZE_PREFIX
from .native_wire import NATIVE_WIRE
from .response_header import encode_response_header, response_header_version
from .schema import Kind, shape_of
from .wire import INT16, INT32, INT64, uvarint

__all__ = ["FETCH_KEY", "SizedRecords", "encode_fetch_response", "encode_plain_fetch_response",
           "records_size"]

FETCH_KEY = 1
_FIRST_VERSION = 4
_FIRST_FLEXIBLE = 12
_FIRST_TOPIC_ID = 13
_MAX_RECORDS = 2**31 - 1
_ZERO_UUID = bytes(16)
_NO_TAGS = b"\x00"


class SizedRecords(Protocol):
    """Anything the server can write as a partition's records; `size` is its length in bytes."""

    @property
    def size(self) -> int: ...


Part = bytes | Any  # bytes we wrote, or a caller's records object


def encode_fetch_response(correlation_id: int, response: Any) -> list[Part]:
    """The frame for `response` (a kio FetchResponse entity) as a list of parts.

    Records objects of size 0 contribute only their length prefix and are left out. Raises
    `EncodeError` for an entity that is not a FetchResponse v4+ or holds invalid records.
    """
    version = getattr(type(response), "__version__", None)
    if getattr(type(response), "__api_key__", None) != FETCH_KEY or version is None:
        raise EncodeError(f"not a kio FetchResponse: {type(response).__name__}")
    if version < _FIRST_VERSION:
        raise EncodeError(f"FetchResponse v{version} predates record batch v2")
    writer = _PartsWriter(version)
    writer.raw(bytes(SIZE_PREFIX.size))
    writer.raw(encode_response_header(correlation_id, response_header_version(FETCH_KEY, version)))
    try:
        writer.response(response)
    except EncodeError:
        raise
    except (AttributeError, TypeError, ValueError, OverflowError, struct.error) as exc:
        raise EncodeError(f"cannot encode FetchResponse v{version}: {exc!r}") from None
    return writer.finish()


def encode_plain_fetch_response(correlation_id: int, version: int, error_code: int,
                                session_id: int, responses: Sequence[dict[str, Any]]
                                ) -> list[Part]:
    """The frame of a Fetch response v4-18 without tagged fields, as parts.

    `responses` holds a dict per topic (`topic`, `topic_id`, `partitions`) and per partition
    (`partition_index`, `error_code`, `high_watermark`, `last_stable_offset`,
    `log_start_offset`, `aborted_transactions`: None or dicts of `producer_id` and
    `first_offset`, `preferred_read_replica`, `records`); throttle time is 0. Joined, the parts
    equal `encode_fetch_response` of the same values built into the entity. Written in one
    native call when the extension is built (`_native_fetch_response.c`); what that call leaves
    undecided takes `encode_plain_py`, which names the error.
    """
    if _native_encode is not None:
        parts = _native_encode(correlation_id, version, error_code, session_id, responses)
        if parts is not None:
            return parts
    return encode_plain_py(correlation_id, version, error_code, session_id, responses)


def encode_plain_py(correlation_id: int, version: int, error_code: int, session_id: int,
                    responses: Sequence[dict[str, Any]]) -> list[Part]:
    """`encode_plain_fetch_response` in Python alone: the native writer's twin, which defines
    it."""
    if not _FIRST_VERSION <= version <= 18:
        raise EncodeError(f"FetchResponse v{version} is not written here")
    flexible = version >= _FIRST_FLEXIBLE
    tags = _NO_TAGS if flexible else b""
    count = _compact_count if flexible else INT32.pack
    parts: list[Part] = []
    pending = [bytes(SIZE_PREFIX.size), INT32.pack(correlation_id), tags, INT32.pack(0)]
    if version >= 7:
        pending.append(_ERROR_SESSION.pack(error_code, session_id))
    pending.append(count(len(responses)))
    total = 0
    for topic in responses:
        if version >= _FIRST_TOPIC_ID:
            topic_id = topic["topic_id"]
            pending.append(_ZERO_UUID if topic_id is None else topic_id.bytes)
        else:
            pending.append(_string(topic["topic"], flexible))
        partitions = topic["partitions"]
        pending.append(count(len(partitions)))
        for p in partitions:
            records = p["records"]
            size = records_size(records)
            pending.append(_plain_partition_head(p, version, size))
            if size:
                chunk = b"".join(pending)
                parts.append(chunk)
                parts.append(records)
                total += len(chunk) + size
                pending = []
            pending.append(tags)
        pending.append(tags)
    pending.append(tags)
    chunk = b"".join(pending)
    parts.append(chunk)
    total += len(chunk)
    first = bytearray(parts[0])
    SIZE_PREFIX.pack_into(first, 0, total - SIZE_PREFIX.size)
    parts[0] = bytes(first)
    return parts


def _plain_partition_head(p: dict[str, Any], version: int, size: int) -> bytes:
    """A partition's fields up to and including its records' length prefix."""
    flexible = version >= _FIRST_FLEXIBLE
    aborted = p["aborted_transactions"]
    if aborted is None:
        listed = _NULL_COMPACT if flexible else _NULL_CLASSIC
    else:
        tags = _NO_TAGS if flexible else b""
        listed = b"".join([_compact_count(len(aborted)) if flexible else INT32.pack(len(aborted)),
                           *(_ABORTED.pack(t["producer_id"], t["first_offset"]) + tags
                             for t in aborted)])
    return _partition_fields(version, p["partition_index"], p["error_code"],
                             p["high_watermark"], p["last_stable_offset"], p["log_start_offset"],
                             listed, p["preferred_read_replica"]) + \
        (uvarint(size + 1) if flexible else INT32.pack(size))


def _partition_fields(version: int, index: int, error_code: int, high_watermark: int,
                      last_stable_offset: int, log_start_offset: int, aborted: bytes,
                      preferred_read_replica: int) -> bytes:
    """A partition's fields before its records, the aborted transactions given encoded; both
    writers use it, one bytes object per partition."""
    if version >= 5:
        head = _PARTITION_HEAD_V5.pack(index, error_code, high_watermark, last_stable_offset,
                                       log_start_offset) + aborted
    else:
        head = _PARTITION_HEAD_V4.pack(index, error_code, high_watermark,
                                       last_stable_offset) + aborted
    return head + INT32.pack(preferred_read_replica) if version >= 11 else head


def _compact_count(count: int) -> bytes:
    return uvarint(count + 1)


def _string(text: str, flexible: bool) -> bytes:
    encoded = text.encode()
    return (uvarint(len(encoded) + 1) if flexible else INT16.pack(len(encoded))) + encoded


def records_size(records: object) -> int:
    """The byte length of a records value: len() of bytes-likes, else its int `size`."""
    if isinstance(records, bytes | bytearray):
        return len(records)
    if isinstance(records, memoryview):
        return records.nbytes
    size = getattr(records, "size", None)
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _MAX_RECORDS:
        raise EncodeError(f"records object {type(records).__name__} has no valid size: {size!r}")
    return size


class _PartsWriter:
    """Builds the parts list.

    Invariant: `parts` followed by `pending` is the frame so far; `pending` collects our bytes
    until a records object has to be placed after them; `total` counts every byte, records
    included.
    """

    __slots__ = ("flexible", "null", "parts", "pending", "total", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.flexible = version >= _FIRST_FLEXIBLE
        self.null = _NULL_COMPACT if self.flexible else INT32.pack(-1)  # null array or records
        self.parts: list[Part] = []
        self.pending = bytearray()
        self.total = 0

    def finish(self) -> list[Part]:
        self._flush()
        first = bytearray(self.parts[0])
        SIZE_PREFIX.pack_into(first, 0, self.total - SIZE_PREFIX.size)
        self.parts[0] = bytes(first)
        return self.parts

    def raw(self, data: bytes) -> None:
        self.pending += data
        self.total += len(data)

    def response(self, response: Any) -> None:
        self.raw(INT32.pack(_millis(response.throttle_time)))
        if self.version >= 7:
            self.raw(INT16.pack(int(response.error_code)) + INT32.pack(response.session_id))
        self.count(len(response.responses))
        for topic in response.responses:
            self.topic(topic)
        self.tags(response)

    def topic(self, topic: Any) -> None:
        if self.version >= _FIRST_TOPIC_ID:
            topic_id: uuid.UUID | None = topic.topic_id
            self.raw(_ZERO_UUID if topic_id is None else topic_id.bytes)
        else:
            self.string(topic.topic)
        self.count(len(topic.partitions))
        for partition in topic.partitions:
            self.partition(partition)
        self.tags(topic)

    def partition(self, p: Any) -> None:
        aborted = p.aborted_transactions
        version = self.version  # fields of later versions are not on older entities
        head = _partition_fields(version, p.partition_index, int(p.error_code),
                                 p.high_watermark, p.last_stable_offset,
                                 p.log_start_offset if version >= 5 else -1,
                                 self.null if aborted is None else self.aborted(aborted),
                                 p.preferred_read_replica if version >= 11 else -1)
        records = p.records
        if records is None:
            self.raw(head + self.null + self.tag_bytes(p))
            return
        size = records_size(records)
        self.raw(head + (uvarint(size + 1) if self.flexible else INT32.pack(size)))
        if size:
            self._flush()
            self.parts.append(records)
            self.total += size
        self.raw(self.tag_bytes(p))

    def aborted(self, aborted: Sequence[Any]) -> bytes:
        entries = [
            INT64.pack(txn.producer_id) + INT64.pack(txn.first_offset) + self.tag_bytes(txn)
            for txn in aborted
        ]
        return self.count_bytes(len(entries)) + b"".join(entries)

    def string(self, text: str) -> None:
        self.raw(_string(text, self.flexible))

    def count(self, count: int) -> None:
        self.raw(self.count_bytes(count))

    def count_bytes(self, count: int) -> bytes:
        return _compact_count(count) if self.flexible else INT32.pack(count)

    def tags(self, entity: Any) -> None:
        self.raw(self.tag_bytes(entity))

    def tag_bytes(self, entity: Any) -> bytes:
        """The tagged-field section of a flexible entity: fields that differ from default."""
        if not self.flexible:
            return b""
        entries = []
        for tag, name, default in _tagged_fields(type(entity)):
            value = getattr(entity, name)
            if value is not default and value != default:  # identity: the untouched default
                encoded = _encode_tag_value(value)
                entries.append(uvarint(tag) + uvarint(len(encoded)) + encoded)
        return uvarint(len(entries)) + b"".join(entries) if entries else _NO_TAGS

    def _flush(self) -> None:
        if self.pending:
            self.parts.append(bytes(self.pending))
            self.pending = bytearray()


_native_encode = NATIVE_WIRE.encode_plain_fetch if NATIVE_WIRE is not None else None
NATIVE = _native_encode is not None

_NULL_COMPACT = uvarint(0)
_NULL_CLASSIC = INT32.pack(-1)
_ERROR_SESSION = struct.Struct(">hi")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
# partition_index, error_code, high_watermark, last_stable_offset[, log_start_offset (v5+)]
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")
_PARTITION_HEAD_V5 = struct.Struct(">ihqqq")


@functools.cache
def _tagged_fields(entity_type: type) -> tuple[tuple[int, str, Any], ...]:
    """(tag, field name, default) for each tagged field, in tag order as the spec requires."""
    defaults = {field.name: field.default for field in dataclasses.fields(entity_type)}
    found = []
    for tag, field in sorted(shape_of(entity_type).tagged.items()):
        if field.kind is not Kind.ENTITY:
            raise EncodeError(f"{entity_type.__name__}.{field.name}: only struct tags supported")
        found.append((tag, field.name, defaults[field.name]))
    return tuple(found)


def _encode_tag_value(value: Any) -> bytes:
    """A struct, or an array of structs, as a tagged field's value (flexible encoding)."""
    if isinstance(value, tuple):
        return uvarint(len(value) + 1) + b"".join(encode_entity(item) for item in value)
    return encode_entity(value)


def _millis(delta: timedelta) -> int:
    return round(delta.total_seconds() * 1000)
