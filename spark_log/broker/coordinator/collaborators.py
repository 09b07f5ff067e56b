"""What a coordinator (group or transaction) needs from the rest of the broker, as protocols:
its internal topic (how many partitions it has, creating it on first use) and that topic's
partition logs (appending with origin COORDINATOR, reading to load).

The broker hands its topic manager and replica manager in; a test may hand in anything with
these methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from spark_log.storage.append_info import AppendInfo, AppendOrigin

if TYPE_CHECKING:
    from spark_log.storage.log.partition_log import PartitionLog


class InternalTopics(Protocol):
    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, None if it does not exist."""
        ...

    def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> object:
        """Create the internal topic unless it exists."""
        ...


class PartitionLogs(Protocol):
    def log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log; UnknownTopicError if the broker has none."""
        ...

    def append(self, topic: str, partition: int, records: bytes | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Append whole batches to the partition this broker leads."""
        ...
