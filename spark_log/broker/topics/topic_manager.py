"""Creating, deleting, growing and configuring topics: metadata and logs kept in step.

A topic's effective log config is the broker's `log.*` defaults with the topic's own overrides
on top, as in Kafka. Every change is validated in full before anything is written, so a bad
request (invalid name, config or partition count) changes nothing; `validate_only` stops there.
Auto-creation (Metadata with `auto.create.topics.enable`) uses `num.partitions`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.errors import KafkaError, UnknownTopicError
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.group.offsets_topic import topic_configs as offsets_topic_configs
from spark_log.broker.topics.topic_metadata import TopicMetadata
from spark_log.protocol import ErrorCode
from spark_log.storage.data_dir.topics_file import INTERNAL_TOPICS, TopicInfo
from spark_log.storage.errors import InvalidConfigurationError
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_manager import LogManager

log = logging.getLogger(__name__)

BROKER_COUNT = 1
_NIL_ID = uuid.UUID(int=0)


class TopicManager:
    """Owns topic lifecycle. Invariant: every partition of every known topic has an open log
    whose config is `log_config(topic)`. Not thread-safe (event loop only)."""

    def __init__(self, config: BrokerConfig, metadata: TopicMetadata) -> None:
        self.config = config
        self.metadata = metadata
        self.logs: LogManager
        # from_properties({}, base=...) leaves `overridden` empty: only topic overrides count.
        self.defaults = LogConfig.from_properties(
            {}, base=LogConfig.from_properties(config.topic_defaults()))

    def all_log_configs(self) -> dict[str, LogConfig]:
        return {info.name: self.log_config(info.name) for info in self.metadata.all()}

    def attach(self, logs: LogManager) -> None:
        """Use `logs` and give every partition of every topic its log (a partition whose
        directory is missing — e.g. lost with a disk — starts empty)."""
        self.logs = logs
        for info in self.metadata.all():
            config = self.log_config(info.name)
            for partition in range(info.partitions):
                self.logs.get_or_create(info.name, partition, config)

    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, None if there is no such topic."""
        info = self.metadata.get(name)
        return info.partitions if info is not None else None

    def log_config(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig:
        if overrides is None:
            info = self.metadata.get(topic)
            overrides = info.configs if info else {}
        return LogConfig.from_properties(dict(overrides), base=self.defaults)

    # ---- create ---------------------------------------------------------------------------
    def create(self, name: str, partitions: int = -1, replication_factor: int = -1,
               configs: Mapping[str, str] | None = None, validate_only: bool = False
               ) -> TopicInfo:
        count = self.config.get("num.partitions") if partitions == -1 else partitions
        factor = self.config.get("default.replication.factor") \
            if replication_factor == -1 else replication_factor
        self.metadata.check_new(name, count)
        if factor < 1:
            raise KafkaError(ErrorCode.invalid_replication_factor,
                             "Replication factor must be larger than 0, or -1 to use the default "
                             "value.")
        if factor > BROKER_COUNT:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {factor} time(s): The target replication "
                f"factor of {factor} cannot be reached because only {BROKER_COUNT} broker(s) "
                "are registered.")
        overrides = dict(configs or {})
        config = self._checked_config(overrides)
        if validate_only:
            return TopicInfo(name, _NIL_ID, count, overrides)
        info = self.metadata.create(name, count, overrides)
        self.logs.update_config(name, config)
        for partition in range(count):
            self.logs.get_or_create(name, partition, config)
        log.info("Created topic %s with %d partition(s)%s", name, count,
                 f" and configs {overrides}" if overrides else "")
        return info

    def auto_create(self, name: str) -> TopicInfo:
        """Create `name` with the broker defaults (Metadata auto-creation); __consumer_offsets
        gets its own partition count and configs, as Kafka's auto-creation gives it."""
        if name == OFFSETS_TOPIC:
            return self.ensure_internal(name, self.config.get("offsets.topic.num.partitions"),
                                        offsets_topic_configs(self.config))
        return self.create(name)

    def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo:
        """Create an internal topic (__consumer_offsets ...) unless it exists."""
        assert name in INTERNAL_TOPICS
        existing = self.metadata.get(name)
        if existing is not None:
            return existing
        return self.create(name, partitions, 1, configs)

    # ---- delete ---------------------------------------------------------------------------
    def delete(self, name: str) -> TopicInfo:
        if not self.config.get("delete.topic.enable"):
            raise KafkaError(ErrorCode.topic_deletion_disabled,
                             "Topic deletion is disabled (delete.topic.enable=false).")
        info = self.metadata.require(name)
        if info.internal:
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Topic {name} is an internal topic and cannot be deleted.")
        self.metadata.delete(name)
        for partition in range(info.partitions):
            self.logs.delete(name, partition)
        log.info("Deleted topic %s", name)
        return info

    def delete_records(self, name: str, partition: int, offset: int) -> int:
        """DeleteRecords: the partition's log starts at `offset` (-1: its high watermark);
        returns the new log start. Refused for internal topics, as Kafka refuses it: their
        records are the coordinators' state."""
        if self.metadata.require(name).internal:
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"Cannot delete records of internal topic {name}.")
        found = self.logs.get(name, partition)
        if found is None:
            raise UnknownTopicError(f"{name}-{partition}")
        return found.delete_records_before(offset)

    # ---- grow and configure -----------------------------------------------------------------
    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicInfo:
        if self.metadata.require(name).internal:
            # Coordinators hash a group or transactional id onto these topics' partition count:
            # a new count would move ids away from the partitions holding their state. Kafka's
            # broker accepts this (only its old topic tool refused); here it is refused, with the
            # code Kafka answers when it refuses an operation on an internal topic (an append,
            # DeleteRecords).
            raise KafkaError(ErrorCode.invalid_topic_exception,
                             f"The number of partitions of the internal topic {name} cannot be "
                             "changed: coordinators map ids onto its partitions by that number.")
        info = self.metadata.check_partition_increase(name, count)
        if validate_only:
            return info
        previous = info.partitions
        info = self.metadata.set_partitions(name, count)
        config = self.log_config(name)
        for partition in range(previous, count):
            self.logs.get_or_create(name, partition, config)
        log.info("Topic %s now has %d partitions (was %d)", name, count, previous)
        return info

    def set_configs(self, name: str, overrides: Mapping[str, str],
                    validate_only: bool = False) -> TopicInfo:
        info = self.metadata.require(name)
        config = self._checked_config(overrides)
        if validate_only:
            return info
        info = self.metadata.set_configs(name, overrides)
        self.logs.update_config(name, config)
        log.info("Topic %s configs are now %s", name, dict(overrides) or "the defaults")
        return info

    def _checked_config(self, overrides: Mapping[str, str]) -> LogConfig:
        try:
            return self.log_config("", overrides)
        except InvalidConfigurationError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None

