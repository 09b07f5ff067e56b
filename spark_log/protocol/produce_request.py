"""Produce requests (v3-v11) decoded by hand: the broker's hottest request, read in one pass.

kio's generic reader needs a structure walk first (`unknown_tags.check_structure`, so a
hostile count cannot make it allocate) and copies every partition's records; for a
one-record request that is most of the decoding time. This reader checks every length and
count as it goes, skips tagged fields (Produce defines none, so all are unknown), and hands
out each partition's records as a `memoryview` of the frame — no copy. Its result has the
attribute names of kio's `ProduceRequest` that the broker reads, and `timeout_ms` for kio's
`timeout`; `tests/protocol/test_produce_request.py` holds it equal to kio on every version.
With the extension built, a body is read in one native call (`_native_wire.read_produce`);
whatever that call leaves undecided takes the reader here, which defines it and names the error.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .body_reader import BodyReader
from .errors import ProtocolError
from .native_wire import NATIVE_WIRE

__all__ = ["PartitionProduceData", "ProduceRequest", "TopicProduceData", "decode_produce_request"]

MIN_VERSION, MAX_VERSION = 3, 11
FIRST_FLEXIBLE = 9

_ACKS_TIMEOUT = struct.Struct(">hi")

# Named tuples, not frozen dataclasses: one is built per partition of every Produce request,
# and a frozen dataclass's __init__ sets each field through object.__setattr__.


class PartitionProduceData(NamedTuple):
    index: int
    records: memoryview | None  # null records are the handler's to refuse (CORRUPT_MESSAGE)


class TopicProduceData(NamedTuple):
    name: str
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequest(NamedTuple):
    """A decoded Produce request. Invariant: every records view lies inside the frame."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


def decode_produce_request(version: int, body: bytes | memoryview) -> ProduceRequest:
    """Decode a Produce request body of `version`; trailing bytes are ignored, as in Kafka.
    Raises `ProtocolError` naming what is wrong."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ProtocolError(f"Produce v{version} is not read here ({MIN_VERSION}-{MAX_VERSION})")
    flexible = version >= FIRST_FLEXIBLE
    if _native_read is not None:  # records are views of a view of the body
        view = body if type(body) is memoryview else memoryview(body)
        request = _native_read(view, flexible, ProduceRequest, TopicProduceData,
                               PartitionProduceData)
        if request is not None:
            return request
    return decode_py(body, flexible, version)


def decode_py(body: bytes | memoryview, flexible: bool, version: int) -> ProduceRequest:
    """The body read in Python alone: the native reader's twin, which defines it."""
    try:
        return _decode(BodyReader(memoryview(body).cast("B"), flexible))
    except ProtocolError as e:
        raise ProtocolError(f"malformed ProduceRequest v{version}: {e}") from None


_native_read = NATIVE_WIRE.read_produce if NATIVE_WIRE is not None else None
NATIVE = _native_read is not None


def _decode(reader: BodyReader) -> ProduceRequest:
    transactional_id = reader.nullable_string("transactional_id")
    acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT, "acks and timeout_ms")
    topics = []
    for _ in range(reader.count("topic_data")):
        name = reader.string("topic name")
        partitions = []
        for _ in range(reader.count("partition_data")):
            index = reader.int32("partition index")
            partitions.append(PartitionProduceData(index, reader.nullable_bytes("records")))
            reader.tags("partition_data")  # Produce defines none: all are skipped
        reader.tags("topic_data")
        topics.append(TopicProduceData(name, tuple(partitions)))
    reader.tags("ProduceRequest")
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))
