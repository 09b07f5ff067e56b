"""Topics as the cluster metadata has them, and changing them through the controller.

A topic's effective log config is the broker's `log.*` defaults with the topic's own overrides
(from the metadata) on top, as in Kafka. Creating, deleting and growing topics are requests to
the active controller, which validates and commits them; this broker answers once it has applied
the change itself, so a client that created a topic here can use it here at once. Auto-creation
(Metadata with `auto.create.topics.enable`) and the coordinators' internal topics go the same
way. DeleteRecords stays on the partition's leader: it moves a log start offset, not metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.errors import KafkaError, UnknownTopicError
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.group.offsets_topic import topic_configs as offsets_topic_configs
from spark_log.metadata import MetadataImage
from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS, TopicInfo
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_manager import LogManager

log = logging.getLogger(__name__)

CREATE_TOPICS_VERSION = 7
APPLY_TIMEOUT_S = 30.0


class Controller(Protocol):
    async def call(self, request: RequestPayload, timeout_s: float | None = None
                   ) -> ResponsePayload: ...


class TopicView(Protocol):
    """The metadata cache, as far as topics go."""

    @property
    def image(self) -> MetadataImage: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def require(self, name: str) -> TopicInfo: ...

    async def wait_until(self, done: Callable[[MetadataImage], bool],
                         timeout_s: float) -> bool: ...


class TopicManager:
    """Reads topics from the metadata and sends changes to the controller. Not thread-safe
    (event loop only)."""

    def __init__(self, config: BrokerConfig, metadata: TopicView, controller: Controller,
                 logs: LogManager, internal_replication: Callable[[str], int]) -> None:
        self.config, self.metadata, self.controller, self.logs = config, metadata, controller, logs
        self.internal_replication = internal_replication
        self.defaults = self.topic_defaults(config)

    @staticmethod
    def topic_defaults(config: BrokerConfig) -> LogConfig:
        """A topic's log config before its own overrides: the broker's `log.*` settings."""
        # from_properties({}, base=...) leaves `overridden` empty: only topic overrides count.
        return LogConfig.from_properties(
            {}, base=LogConfig.from_properties(config.topic_defaults()))

    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, None if there is no such topic."""
        info = self.metadata.get(name)
        return info.partitions if info is not None else None

    def log_config(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig:
        if overrides is None:
            info = self.metadata.get(topic)
            overrides = info.configs if info else {}
        return LogConfig.from_properties(dict(overrides), base=self.defaults)

    def config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        """The log config of `topic` as `image` has it (what the metadata publisher opens logs
        with)."""
        return LogConfig.from_properties(dict(image.topic_configs(topic)), base=self.defaults)

    # ---- through the controller ----------------------------------------------------------
    async def forward(self, request: RequestPayload) -> ResponsePayload:
        return await self.controller.call(request)

    async def applied(self, done: Callable[[MetadataImage], bool]) -> bool:
        """Wait until this broker's metadata satisfies `done` (a change the controller made)."""
        applied = await self.metadata.wait_until(done, APPLY_TIMEOUT_S)
        if not applied:
            log.warning("the controller's change is not in this broker's metadata after %ss",
                        APPLY_TIMEOUT_S)
        return applied

    async def create(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None) -> TopicInfo:
        request = build(_create_topics_type(), {
            "topics": [{"name": name, "num_partitions": partitions,
                        "replication_factor": replication_factor, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": int(APPLY_TIMEOUT_S * 1000), "validate_only": False})
        response = await self.forward(request)
        (result,) = response.topics
        if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise KafkaError(ErrorCode(result.error_code), result.error_message)
        await self.applied(lambda image: image.topic(name) is not None)
        return self.metadata.require(name)

    async def auto_create(self, name: str) -> TopicInfo:
        """Create `name` with the broker defaults (Metadata auto-creation); __consumer_offsets
        gets its own partition count and configs, as Kafka's auto-creation gives it."""
        if name == OFFSETS_TOPIC:
            return await self.ensure_internal(
                name, self.config.get("offsets.topic.num.partitions"),
                offsets_topic_configs(self.config))
        return await self.create(name)

    async def ensure_internal(self, name: str, partitions: int,
                              configs: Mapping[str, str]) -> TopicInfo:
        """Create an internal topic (__consumer_offsets ...) unless it exists."""
        assert name in INTERNAL_TOPICS
        existing = self.metadata.get(name)
        if existing is not None:
            return existing
        return await self.create(name, partitions, self.internal_replication(name), configs)

    # ---- on the leader -------------------------------------------------------------------
    def delete_records(self, name: str, partition: int, offset: int, log_of: Any) -> int:
        """DeleteRecords: the partition's log starts at `offset` (-1: its high watermark);
        returns the new log start. Refused for internal topics, as Kafka refuses it: their
        records are the coordinators' state."""
        if self.metadata.require(name).internal:
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Cannot delete records of internal topic {name}.")
        found = log_of(name, partition)
        if found is None:
            raise UnknownTopicError(f"{name}-{partition}")
        return found.delete_records_before(offset)


def _create_topics_type() -> type:
    from kio.schema.create_topics.v7.request import CreateTopicsRequest

    return CreateTopicsRequest
