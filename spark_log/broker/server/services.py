"""What request handlers reach of the broker: `Services`, assembled once by the broker and handed
to every request in its `RequestContext`, and the narrow protocols it is typed with.

Each protocol lists only the calls handlers make (the topic manager, replica manager, group and
transaction coordinators and the producer-id manager satisfy them), so the server package
imports no concrete coordinator or manager and none of them imports the server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.group.group_requests import (
        FetchedOffset,
        JoinRequest,
        PartitionCommit,
        SyncRequest,
    )
    from spark_log.broker.metrics.broker_metrics import BrokerMetrics
    from spark_log.broker.transaction.transaction_metadata import (
        ProducerIdAndEpoch,
        TransactionMetadata,
    )
    from spark_log.clock import Clock
    from spark_log.metadata import BrokerRegistration, MetadataImage, PartitionRegistration
    from spark_log.protocol import ApiSet, ErrorCode
    from spark_log.storage.append_info import AppendInfo
    from spark_log.storage.data_dir.topics_file import TopicInfo
    from spark_log.storage.log.file_records import FetchSlice
    from spark_log.storage.log.log_config import LogConfig
    from spark_log.storage.log.log_manager import LogManager
    from spark_log.storage.log.partition_log import PartitionLog

TopicPartition = tuple[str, int]


class TopicRegistry(Protocol):
    """The topics this broker knows (read only)."""

    def get(self, name: str) -> TopicInfo | None: ...

    def require(self, name: str) -> TopicInfo: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def all(self) -> list[TopicInfo]: ...


class Cluster(Protocol):
    """The cluster metadata this broker applied: partitions, brokers and their endpoints."""

    @property
    def image(self) -> MetadataImage: ...

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None: ...

    def live_brokers(self) -> list[BrokerRegistration]: ...

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None: ...


class Topics(Protocol):
    """Topics as the metadata has them; changes go through the controller."""

    @property
    def metadata(self) -> TopicRegistry: ...

    def log_config(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig: ...

    async def forward(self, request: Any) -> Any: ...

    async def applied(self, done: Callable[[MetadataImage], bool]) -> bool: ...

    async def auto_create(self, name: str) -> TopicInfo: ...

    def delete_records(self, name: str, partition: int, offset: int,
                       log_of: Callable[[str, int], PartitionLog]) -> int: ...


class Replicas(Protocol):
    """The partitions this broker hosts: appends and reads (on the leader), leader epochs and
    waiting for data."""

    def log(self, topic: str, partition: int) -> PartitionLog: ...

    def check_leader_epoch(self, topic: str, partition: int, current: int) -> None: ...

    def leader_epoch(self, topic: str, partition: int) -> int: ...

    def append(self, topic: str, partition: int, records: bytes | memoryview) -> AppendInfo: ...

    def last_stable_offset(self, target: PartitionLog) -> int: ...

    def aborted_transactions(self, target: PartitionLog, fetch_offset: int, records: FetchSlice
                             ) -> list[dict[str, int]]: ...

    async def wait_for_append(self, partitions: Iterable[TopicPartition],
                              timeout_s: float) -> None: ...

    def wake_all(self) -> None: ...


class Groups(Protocol):
    """The group coordinator: membership, group administration and committed offsets."""

    def ensure_ready(self, group_id: str) -> None: ...

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, int]: ...

    async def join_group(self, req: JoinRequest) -> dict[str, Any]: ...

    async def sync_group(self, req: SyncRequest) -> dict[str, Any]: ...

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode: ...

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]: ...

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> tuple[ErrorCode, list[dict[str, str]]]: ...

    def describe_groups(self, group_ids: Iterable[str], api_version: int
                        ) -> list[dict[str, Any]]: ...

    def delete_groups(self, group_ids: Iterable[str]) -> list[ErrorCode]: ...

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                       generation: int, commits: Sequence[PartitionCommit],
                       retention_ms: int = -1, api_version: int = 0) -> list[ErrorCode]: ...

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                      require_stable: bool = False) -> list[FetchedOffset]: ...

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> list[ErrorCode]: ...

    def on_topics_deleted(self, topics: Iterable[str]) -> None: ...

    def commit_transactional_offsets(self, group_id: str, producer_id: int,
                                     producer_epoch: int, commits: Sequence[PartitionCommit],
                                     generation: int = -1, member_id: str = "",
                                     instance_id: str | None = None) -> list[ErrorCode]: ...


class Transactions(Protocol):
    """The transaction coordinator."""

    @property
    def transactions(self) -> Mapping[str, TransactionMetadata]: ...

    def loaded(self) -> bool: ...

    async def prepare(self) -> ErrorCode: ...

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, int]: ...

    def ensure_ready(self, transactional_id: str | None) -> None: ...

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: ProducerIdAndEpoch | None) -> tuple[int, int]: ...

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition]) -> None: ...

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                    group_id: str) -> None: ...

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                        commit: bool) -> None: ...

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int) -> ErrorCode: ...


class ProducerIds(Protocol):
    async def ready(self) -> None: ...

    def next_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Services:
    """The broker as its request handlers see it. Built once the listener is bound (the
    advertised address is known) and never changed; everything in it is used from the broker's
    event loop only."""

    node_id: int
    cluster_id: str
    advertised_host: str
    advertised_port: int
    listener_name: str  # the clients' listener, whose endpoints Metadata answers with
    data_dir: Path
    config: BrokerConfig
    clock: Clock
    metrics: BrokerMetrics
    api_set: ApiSet
    logs: LogManager
    cluster: Cluster
    topics: Topics
    replicas: Replicas
    groups: Groups
    transactions: Transactions
    producer_ids: ProducerIds
