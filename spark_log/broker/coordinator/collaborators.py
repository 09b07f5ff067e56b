"""What a coordinator (group or transaction) needs from the rest of the broker, as protocols:
its internal topic (how many partitions it has, creating it on first use) and that topic's
partition logs (appending with origin COORDINATOR, reading to load). `creating` runs the
creation of a missing topic in the background for a caller that cannot wait for it.

The broker hands its topic manager and replica manager in; a test may hand in anything with
these methods.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from spark_log.storage.append_info import AppendInfo, AppendOrigin

if TYPE_CHECKING:
    from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)


class InternalTopics(Protocol):
    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, None if it does not exist."""
        ...

    async def ensure_internal(self, name: str, partitions: int,
                              configs: Mapping[str, str]) -> object:
        """Create the internal topic unless it exists (through the controller)."""
        ...


class PartitionLogs(Protocol):
    def log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log; UnknownTopicError if the broker has none."""
        ...

    def append(self, topic: str, partition: int, records: bytes | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Append whole batches to the partition this broker leads."""
        ...


class TopicCreation:
    """A missing internal topic, created once in the background: a synchronous caller asks
    for it (`request`) and answers COORDINATOR_NOT_AVAILABLE meanwhile; an asynchronous one
    awaits it (`create`)."""

    def __init__(self, topics: InternalTopics, name: str, partitions: Callable[[], int],
                 configs: Callable[[], Mapping[str, str]]) -> None:
        self.topics, self.name, self.partitions, self.configs = topics, name, partitions, configs
        self._task: asyncio.Task[None] | None = None

    def exists(self) -> bool:
        return self.topics.partition_count(self.name) is not None

    async def create(self) -> None:
        if not self.exists():
            await self.topics.ensure_internal(self.name, self.partitions(), self.configs())

    def request(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._create_logged())

    async def _create_logged(self) -> None:
        try:
            await self.create()
        except Exception as e:
            log.error("Cannot create %s: %s", self.name, e)
