"""Fetch requests (v4-v18) decoded by hand: every consumer and follower sends one per round, so
like Produce it is read in one pass rather than through kio's structure walk and reader.

Every length and count is checked as it is read; tagged fields this version defines are
decoded (cluster_id and replica_state at the top, replica_directory_id and high_watermark in a
partition) and every other tag skipped, as KIP-482 asks. The result carries kio's attribute
names, with `max_wait_ms` for kio's `max_wait`; `tests/protocol/test_fetch_request.py` holds it
equal to kio on every version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .body_reader import BodyReader
from .errors import ProtocolError

__all__ = ["FetchPartition", "FetchRequest", "FetchTopic", "ReplicaState",
           "decode_fetch_request"]

MIN_VERSION, MAX_VERSION = 4, 18
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
FIRST_REPLICA_STATE = 15  # replica_id moves into a tagged field

_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int = -1
    replica_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    replica_directory_id: uuid.UUID | None = None
    high_watermark: int = _I64_MAX


@dataclass(frozen=True, slots=True)
class FetchTopic:
    """One topic: `topic` (its name) before v13, `topic_id` from v13; the other is None."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
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
    try:
        return _decode(BodyReader(memoryview(body).cast("B"), version >= FIRST_FLEXIBLE), version)
    except ProtocolError as e:
        raise ProtocolError(f"malformed FetchRequest v{version}: {e}") from None


def _decode(r: BodyReader, version: int) -> FetchRequest:
    replica_id = r.int32("replica_id") if version < FIRST_REPLICA_STATE else -1
    max_wait_ms, min_bytes, max_bytes = r.int32("max_wait"), r.int32("min_bytes"), \
        r.int32("max_bytes")
    isolation_level = r.int8("isolation_level")
    session_id, session_epoch = (r.int32("session_id"), r.int32("session_epoch")) \
        if version >= 7 else (0, -1)
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
    partition = r.int32("partition")
    leader_epoch = r.int32("current_leader_epoch") if version >= 9 else -1
    fetch_offset = r.int64("fetch_offset")
    last_fetched_epoch = r.int32("last_fetched_epoch") if version >= 12 else -1
    log_start_offset = r.int64("log_start_offset") if version >= 5 else -1
    max_bytes = r.int32("partition_max_bytes")
    directory, high_watermark = None, _I64_MAX
    for tag, value in r.tags("partition"):
        if tag == 0 and version >= 17:
            directory = value.uuid("replica_directory_id")
        elif tag == 1 and version >= 18:
            high_watermark = value.int64("high_watermark")
    return FetchPartition(partition, leader_epoch, fetch_offset, last_fetched_epoch,
                          log_start_offset, max_bytes, directory, high_watermark)
