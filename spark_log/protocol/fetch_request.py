"""Fetch requests (v4-v18) decoded by hand: every consumer and follower sends one per round, so
like Produce it is read in one pass rather than through kio's structure walk and reader.

Every length and count is checked as it is read; tagged fields this version defines are
decoded (cluster_id and replica_state at the top, replica_directory_id and high_watermark in a
partition) and every other tag skipped, as KIP-482 asks. The result carries kio's attribute
names, with `max_wait_ms` for kio's `max_wait`; `tests/protocol/test_fetch_request.py` holds it
equal to kio on every version. With the extension built, a body without tagged fields is read
in one native call (`_native_wire.read_fetch`); the rest takes the reader here, which
defines it and names the error.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from .body_reader import BodyReader
from .errors import ProtocolError
from .native_wire import NATIVE_WIRE
from .wire import uuid_of

__all__ = ["FetchPartition", "FetchRequest", "FetchTopic", "ReplicaState",
           "decode_fetch_request"]

MIN_VERSION, MAX_VERSION = 4, 18
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
FIRST_REPLICA_STATE = 15  # replica_id moves into a tagged field

_I64_MAX = (1 << 63) - 1
# The fixed fields read with one unpack each, by version range.
_HEAD_V4 = struct.Struct(">iiiib")  # replica_id, max_wait, min_bytes, max_bytes, isolation
_HEAD_V7 = struct.Struct(">iiiibii")  # ... session_id, session_epoch
_HEAD_V15 = struct.Struct(">iiibii")  # v15+: replica_id moved into replica_state
_PARTITION_V4 = struct.Struct(">iqi")  # partition, fetch_offset, partition_max_bytes
_PARTITION_V5 = struct.Struct(">iqqi")  # ... log_start_offset before the max bytes
_PARTITION_V9 = struct.Struct(">iiqqi")  # ... current_leader_epoch after the partition
_PARTITION_V12 = struct.Struct(">iiqiqi")  # ... last_fetched_epoch after fetch_offset
_HEAD_NAMES = ("replica_id", "max_wait", "min_bytes", "max_bytes", "isolation_level")
_SESSION_NAMES = ("session_id", "session_epoch")
_PARTITION_V4_NAMES = ("partition", "fetch_offset", "partition_max_bytes")
_PARTITION_V5_NAMES = ("partition", "fetch_offset", "log_start_offset", "partition_max_bytes")
_PARTITION_V9_NAMES = ("partition", "current_leader_epoch", "fetch_offset", "log_start_offset",
                       "partition_max_bytes")
_PARTITION_V12_NAMES = ("partition", "current_leader_epoch", "fetch_offset",
                        "last_fetched_epoch", "log_start_offset", "partition_max_bytes")


class ReplicaState(NamedTuple):
    replica_id: int = -1
    replica_epoch: int = -1


class FetchPartition(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    replica_directory_id: uuid.UUID | None = None
    high_watermark: int = _I64_MAX


class FetchTopic(NamedTuple):
    """One topic: `topic` (its name) before v13, `topic_id` from v13; the other is None."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[FetchPartition, ...]


class FetchRequest(NamedTuple):
    """A decoded Fetch request. `replica_id` is -1 for a consumer; from v15 a follower names
    itself in `replica_state` instead, and `replica_id` repeats it."""

    cluster_id: str | None
    replica_id: int
    replica_state: ReplicaState | None
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: tuple[FetchTopic, ...]
    forgotten_topics_data: tuple[FetchTopic, ...]
    rack_id: str


def decode_fetch_request(version: int, body: bytes | memoryview) -> FetchRequest:
    """Decode a Fetch request body of `version`; trailing bytes are ignored, as in Kafka.
    Raises `ProtocolError` naming what is wrong."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ProtocolError(f"Fetch v{version} is not read here ({MIN_VERSION}-{MAX_VERSION})")
    if _native_read is not None:
        view = body if type(body) is memoryview else memoryview(body)
        request = _native_read(view, version, FetchRequest, FetchTopic, FetchPartition,
                               ReplicaState, uuid_of)
        if request is not None:
            return request
    return decode_py(body, version)


def decode_py(body: bytes | memoryview, version: int) -> FetchRequest:
    """The body read in Python alone: the native reader's twin, which defines it."""
    try:
        return _decode(BodyReader(memoryview(body).cast("B"), version >= FIRST_FLEXIBLE), version)
    except ProtocolError as e:
        raise ProtocolError(f"malformed FetchRequest v{version}: {e}") from None


_native_read = NATIVE_WIRE.read_fetch if NATIVE_WIRE is not None else None
NATIVE = _native_read is not None


def _decode(r: BodyReader, version: int) -> FetchRequest:
    if version < 7:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level = r.fixed(
            _HEAD_V4, _HEAD_NAMES)
        session_id, session_epoch = 0, -1
    elif version < FIRST_REPLICA_STATE:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, \
            session_epoch = r.fixed(_HEAD_V7, _HEAD_NAMES + _SESSION_NAMES)
    else:
        replica_id = -1
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = \
            r.fixed(_HEAD_V15, _HEAD_NAMES[1:] + _SESSION_NAMES)
    topics = tuple(_topic(r, version, partitions=True) for _ in range(r.count("topics")))
    forgotten = tuple(_topic(r, version, partitions=False)
                      for _ in range(r.count("forgotten_topics_data"))) if version >= 7 else ()
    rack_id = r.string("rack_id") if version >= 11 else ""
    cluster_id, replica_state = None, None
    for tag, value in r.tags("FetchRequest"):
        if tag == 0:
            cluster_id = value.nullable_string("cluster_id")
        elif tag == 1 and version >= FIRST_REPLICA_STATE:
            replica_state = ReplicaState(value.int32("replica_id"),
                                         value.int64("replica_epoch"))
    if version >= FIRST_REPLICA_STATE:
        replica_state = replica_state or ReplicaState()
        replica_id = replica_state.replica_id
    return FetchRequest(cluster_id, replica_id, replica_state, max_wait_ms, min_bytes,
                        max_bytes, isolation_level, session_id, session_epoch, topics,
                        forgotten, rack_id)


def _topic(r: BodyReader, version: int, partitions: bool) -> FetchTopic:
    if version >= FIRST_TOPIC_ID:
        name, topic_id = None, r.uuid("topic_id")
    else:
        name, topic_id = r.string("topic"), None
    if partitions:
        parts: tuple = tuple(_partition(r, version) for _ in range(r.count("partitions")))
    else:  # forgotten topics list partition numbers only
        parts = tuple(r.int32("partition") for _ in range(r.count("partitions")))
    for _ in r.tags("topic"):
        pass
    return FetchTopic(name, topic_id, parts)


def _partition(r: BodyReader, version: int) -> FetchPartition:
    if version >= 12:
        partition, leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, \
            max_bytes = r.fixed(_PARTITION_V12, _PARTITION_V12_NAMES)
        if r.pos < r.end and r.buf[r.pos] == 0:  # no tagged fields: nearly always
            r.pos += 1
            return FetchPartition(partition, leader_epoch, fetch_offset, last_fetched_epoch,
                                  log_start_offset, max_bytes)
    elif version >= 9:
        partition, leader_epoch, fetch_offset, log_start_offset, max_bytes = r.fixed(
            _PARTITION_V9, _PARTITION_V9_NAMES)
        last_fetched_epoch = -1
    else:
        last_fetched_epoch = leader_epoch = -1
        if version >= 5:
            partition, fetch_offset, log_start_offset, max_bytes = r.fixed(
                _PARTITION_V5, _PARTITION_V5_NAMES)
        else:
            partition, fetch_offset, max_bytes = r.fixed(_PARTITION_V4, _PARTITION_V4_NAMES)
            log_start_offset = -1
    directory, high_watermark = None, _I64_MAX
    for tag, value in r.tags("partition"):
        if tag == 0 and version >= 17:
            directory = value.uuid("replica_directory_id")
        elif tag == 1 and version >= 18:
            high_watermark = value.int64("high_watermark")
    return FetchPartition(partition, leader_epoch, fetch_offset, last_fetched_epoch,
                          log_start_offset, max_bytes, directory, high_watermark)
