"""The latest cluster metadata image this broker has applied, as request handlers read it:
topics by name and id with their configs, each partition's replicas, leader and epoch, and the
live brokers with their endpoints.

The image is replaced whole by the publisher, never changed in place, so a handler that took it
once sees one consistent state; `wait_until` lets a request that changed the metadata through
the controller answer once this broker has applied the change.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from types import MappingProxyType

from spark_log.broker.errors import UnknownTopicError
from spark_log.deadline import within
from spark_log.metadata import BrokerRegistration, MetadataImage, PartitionRegistration
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS, TopicInfo


class MetadataCache:
    """Invariant: `image` only moves forward in the log (its provenance offset never goes back).
    Not thread-safe: the broker's event loop only."""

    def __init__(self) -> None:
        self._image = MetadataImage.EMPTY
        self._changed = asyncio.Event()
        self._infos: dict[str, TopicInfo] = {}  # built from `_image` on demand; every request
        # that names a topic asks for its info

    @property
    def image(self) -> MetadataImage:
        return self._image

    def update(self, image: MetadataImage) -> None:
        self._image = image
        self._infos = {}
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, done: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait for an image that satisfies `done`; False if none came within `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not done(self._image):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await within(remaining, self._changed.wait())
            except TimeoutError:
                return done(self._image)
        return True

    # ---- topics, as the topic registry of the handlers -----------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        found = self._infos.get(name)
        if found is not None:
            return found
        topic = self._image.topic(name)
        if topic is None:
            return None
        info = self._infos[name] = TopicInfo(
            topic.name, topic.id, len(topic.partitions),
            MappingProxyType(dict(self._image.topic_configs(name))))
        return info

    def require(self, name: str) -> TopicInfo:
        found = self.get(name)
        if found is None:
            raise UnknownTopicError(name)
        return found

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self._image.topics.get(topic_id)
        return self.get(topic.name) if topic is not None else None

    def names(self) -> list[str]:
        return sorted(self._image.topics_by_name)

    def all(self) -> list[TopicInfo]:
        return [info for name in self.names() if (info := self.get(name)) is not None]

    def internal(self, name: str) -> bool:
        return name in INTERNAL_TOPICS

    # ---- partitions and brokers ------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        return self._image.partition(topic, partition)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered, unfenced brokers, by id."""
        return [b for _, b in sorted(self._image.brokers.items()) if not b.fenced]

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        broker = self._image.broker(broker_id)
        found = broker.endpoint(listener) if broker is not None else None
        return (found.host, found.port) if found is not None else None
