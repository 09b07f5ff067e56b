"""Produce requests (v3-v11) decoded by hand: the broker's hottest request, read in one pass.

kio's generic reader needs a structure walk first (`unknown_tags.check_structure`, so a
hostile count cannot make it allocate) and copies every partition's records; for a
one-record request that is most of the decoding time. This reader checks every length and
count as it goes, skips tagged fields (Produce defines none, so all are unknown), and hands
out each partition's records as a `memoryview` of the frame — no copy. Its result has the
attribute names of kio's `ProduceRequest` that the broker reads, and `timeout_ms` for kio's
`timeout`; `tests/protocol/test_produce_request.py` holds it equal to kio on every version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import ProtocolError
from .wire import read_uvarint, skip_tag_section

__all__ = ["PartitionProduceData", "ProduceRequest", "TopicProduceData", "decode_produce_request"]

MIN_VERSION, MAX_VERSION = 3, 11
FIRST_FLEXIBLE = 9

_ACKS_TIMEOUT = struct.Struct(">hi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None  # null records are the handler's to refuse (CORRUPT_MESSAGE)


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
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
    try:
        return _decode(_Reader(memoryview(body).cast("B"), version >= FIRST_FLEXIBLE))
    except ProtocolError as e:
        raise ProtocolError(f"malformed ProduceRequest v{version}: {e}") from None


def _decode(reader: _Reader) -> ProduceRequest:
    transactional_id = reader.string("transactional_id", nullable=True)
    acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT, "acks and timeout_ms")
    topics = []
    for _ in range(reader.count("topic_data")):
        name = reader.string("topic name", nullable=False)
        partitions = []
        for _ in range(reader.count("partition_data")):
            (index,) = reader.fixed(_INT32, "partition index")
            partitions.append(PartitionProduceData(index, reader.records()))
            reader.tags("partition_data")
        reader.tags("topic_data")
        assert name is not None
        topics.append(TopicProduceData(name, tuple(partitions)))
    reader.tags("ProduceRequest")
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


class _Reader:
    """A position in one request body. Invariant: `pos <= end`; every read checks its length
    against `end` before taking bytes, so no count or length can make it read or allocate past
    the frame."""

    __slots__ = ("buf", "end", "flexible", "pos")

    def __init__(self, buf: memoryview, flexible: bool) -> None:
        self.buf, self.end, self.flexible, self.pos = buf, len(buf), flexible, 0

    def fixed(self, fmt: struct.Struct, what: str) -> tuple:
        pos = self.pos
        if pos + fmt.size > self.end:
            raise ProtocolError(f"truncated {what} at {pos}")
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.buf, pos)

    def length(self, what: str) -> int:
        """A length or count: int16/int32 in classic versions, uvarint N+1 in flexible ones;
        -1 is null."""
        if self.flexible:
            raw, self.pos = read_uvarint(self.buf, self.pos, self.end, what)
            return raw - 1
        return -2  # the caller reads the classic width itself

    def count(self, what: str) -> int:
        n = self.length(what)
        if n == -2:
            (n,) = self.fixed(_INT32, what)
        if n < 0:
            raise ProtocolError(f"non-nullable array {what} was null")
        # each element takes at least one byte: a larger count cannot be honest
        if n > self.end - self.pos:
            raise ProtocolError(f"{what} claims {n} elements in "
                                f"{self.end - self.pos} bytes")
        return n

    def string(self, what: str, nullable: bool) -> str | None:
        n = self.length(what)
        if n == -2:
            (n,) = self.fixed(_INT16, what)
        if n < 0:
            if nullable and n == -1:
                return None
            raise ProtocolError(f"{what} is null or has length {n}")
        raw = self._take(n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{what} is not UTF-8: {e}") from None

    def records(self) -> memoryview | None:
        n = self.length("records")
        if n == -2:
            (n,) = self.fixed(_INT32, "records length")
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"records length {n}")
        return self._take(n, "records")

    def tags(self, what: str) -> None:
        if self.flexible:
            self.pos = skip_tag_section(self.buf, self.pos, self.end, what)

    def _take(self, n: int, what: str) -> memoryview:
        pos = self.pos
        if pos + n > self.end:
            raise ProtocolError(f"truncated {what}: {n} bytes at {pos}, "
                                f"{self.end - pos} left")
        self.pos = pos + n
        return self.buf[pos:pos + n]
