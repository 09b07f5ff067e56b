"""Who is appending (Kafka's AppendOrigin) and what an append did (Kafka's LogAppendInfo)."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class AppendOrigin(Enum):
    """Decides which checks an append gets and whether offsets are assigned.

    CLIENT: a producer; every check, offsets and leader epoch assigned.
    COORDINATOR: the group/transaction coordinator; may write control batches.
    REPLICATION: a follower copying the leader; offsets and epochs kept as given.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class AppendInfo(NamedTuple):
    """The result of one append.

    `max_timestamp` is the largest batch max timestamp (-1 if none) and
    `offset_of_max_timestamp` the last offset of the batch carrying it; `log_append_time` is
    the broker time stamped on LogAppendTime topics, else -1 (ProduceResponse's field).
    Immutable.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    batch_count: int
    record_count: int
    size_bytes: int
