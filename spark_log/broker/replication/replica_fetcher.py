"""Followers copying their leaders (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

A partition this broker follows is fetched by one fetcher: one per (source broker, fetcher
id), the id a hash of the partition over `num.replica.fetchers`, each one connection sending
one Fetch (v12, topics by name, this broker's id as `replica_id`) for all its partitions at
once. Each partition is fetched from its log end offset with the epoch of its last batch
(`last_fetched_epoch`, KIP-320); the leader answers with records — appended as they are, offsets
and epochs kept (origin REPLICATION) — and its high watermark and log start offset, which the
follower follows as far as its log reaches; or with a diverging epoch, where the follower
truncates (`spark_log.replication.truncation`, KIP-101/279) before fetching again; or with
OFFSET_OUT_OF_RANGE, when the follower is below the leader's log start (it starts empty there)
or above its log end (only after an unclean election: it truncates to it).

A partition this broker is catching up on (outside the ISR) that a reassignment throttles is
left out of the fetches while the follower-side rate is exceeded (`replication_quota`).

A partition error (a leader epoch that moved on, a leader that no longer leads) holds that
partition back for `replica.fetch.backoff.ms` or until the metadata names its leader again; a
leader that cannot be reached holds back all of the fetcher's partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.list_offsets.v4.request import ListOffsetsRequest

from spark_log.broker.errors import UnknownTopicError
from spark_log.broker.replication.leader_epochs import NotLeaderError
from spark_log.broker.replication.replication_quota import ReplicationQuotas
from spark_log.client.async_connection import AsyncConnection
from spark_log.deadline import within
from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build
from spark_log.replication.truncation import EpochStart, truncation
from spark_log.storage.errors import StorageError
from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LATEST, EARLIEST = -1, -2
STOP_RECHECK_S = 0.1
THROTTLE_HOLD_MS = 100  # a throttled partition's wait before the rate is looked at again


class FollowerLogs(Protocol):
    """The replica manager, as the fetchers use it."""

    def follower_log(self, topic: str, partition: int, leader_epoch: int) -> PartitionLog: ...

    def append_as_follower(self, target: PartitionLog, records: bytes | memoryview,
                           leader_high_watermark: int, leader_log_start: int) -> None: ...

    def in_sync(self, topic: str, partition: int) -> bool: ...


Endpoints = Callable[[int], tuple[str, int] | None]


@dataclass(frozen=True)
class FetcherSettings:
    """Kafka's replica.fetch.* settings (and num.replica.fetchers)."""

    num_fetchers: int = 1
    partition_max_bytes: int = 1 << 20
    response_max_bytes: int = 10 << 20
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> FetcherSettings:
        return cls(get("num.replica.fetchers"), get("replica.fetch.max.bytes"),
                   get("replica.fetch.response.max.bytes"), get("replica.fetch.wait.max.ms"),
                   get("replica.fetch.min.bytes"), get("replica.fetch.backoff.ms"),
                   get("replica.socket.timeout.ms"))


@dataclass
class _Fetching:
    leader_epoch: int
    held_until: float = 0.0  # loop time before which the partition is not fetched


class ReplicaFetcher:
    """Fetches a set of partitions from one leader. Invariant: a partition is in at most one
    fetcher; its fetch offset is always its log's end. Event-loop only."""

    def __init__(self, node_id: int, leader_id: int, fetcher_id: int, logs: FollowerLogs,
                 endpoint_of: Endpoints, settings: FetcherSettings,
                 quotas: ReplicationQuotas | None = None) -> None:
        self.node_id, self.leader_id, self.fetcher_id = node_id, leader_id, fetcher_id
        self.logs, self.endpoint_of, self.settings = logs, endpoint_of, settings
        self.quotas = quotas
        self.partitions: dict[TopicPartition, _Fetching] = {}
        self._changed = asyncio.Event()
        self._connection: AsyncConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def add(self, key: TopicPartition, leader_epoch: int) -> None:
        current = self.partitions.get(key)
        if current is None or current.leader_epoch != leader_epoch or current.held_until:
            self.partitions[key] = _Fetching(leader_epoch)
            self._changed.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-"
                                             f"{self.leader_id}-{self.fetcher_id}")

    async def stop(self) -> None:
        # Cancelled again until it ends: a cancellation absorbed anywhere below (as 3.11's
        # asyncio.wait_for did: tests/test_async_rules.py) must not leave the fetch loop on.
        while self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=STOP_RECHECK_S)
        if self._task is not None and not self._task.cancelled():
            self._task.exception()  # retrieved: an error was logged where it happened
        self._task = None
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    # ---- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = {k: f for k, f in self.partitions.items() if f.held_until <= now}
            if not ready:
                await self._wait_for_work(loop)
                continue
            try:
                await self._fetch_once(ready)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Replica fetcher %d-%d failed; backing off", self.leader_id,
                              self.fetcher_id)
                self._hold(ready, self.settings.backoff_ms)

    async def _wait_for_work(self, loop: asyncio.AbstractEventLoop) -> None:
        self._changed.clear()
        held = [f.held_until for f in self.partitions.values()]
        timeout = max(0.0, min(held) - loop.time()) if held else None
        with contextlib.suppress(TimeoutError):
            await within(timeout, self._changed.wait())

    def _hold(self, partitions: dict[TopicPartition, _Fetching], ms: int) -> None:
        until = asyncio.get_running_loop().time() + ms / 1000
        for key, fetching in partitions.items():
            if self.partitions.get(key) is fetching:
                fetching.held_until = until

    def _throttled(self, key: TopicPartition) -> bool:
        """A partition this broker is catching up on whose traffic is throttled."""
        return self.quotas is not None and not self.logs.in_sync(*key) and \
            self.quotas.throttled("follower", key[0], key[1], self.node_id)

    async def _fetch_once(self, ready: dict[TopicPartition, _Fetching]) -> None:
        if self.quotas is not None and self.quotas.exceeded("follower"):
            held = {k: f for k, f in ready.items() if self._throttled(k)}
            self._hold(held, THROTTLE_HOLD_MS)
            ready = {k: f for k, f in ready.items() if k not in held}
        fetched: dict[TopicPartition, tuple[_Fetching, PartitionLog]] = {}
        for key, fetching in ready.items():
            try:
                fetched[key] = fetching, self.logs.follower_log(*key, fetching.leader_epoch)
            except (NotLeaderError, UnknownTopicError):
                if self.partitions.get(key) is fetching:
                    self.remove(key)  # the metadata moved on; it says where to fetch now
        if not fetched:
            return
        connection = await self._connect()
        if connection is None:
            self._hold(ready, self.settings.backoff_ms)
            return
        timeout_s = (self.settings.socket_timeout_ms + self.settings.wait_max_ms) / 1000
        try:
            response = await connection.call(self._request(fetched), timeout_s)
        except ConnectionError as e:
            log.info("Replica fetcher %d-%d: leader %d did not answer (%s); retrying in %d ms",
                     self.leader_id, self.fetcher_id, self.leader_id, e, self.settings.backoff_ms)
            self._hold(ready, self.settings.backoff_ms)
            return
        if response.error_code != ErrorCode.none:
            log.warning("Replica fetcher %d-%d: fetch failed with %s", self.leader_id,
                        self.fetcher_id, ErrorCode(response.error_code).name)
            self._hold(ready, self.settings.backoff_ms)
            return
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                found = fetched.get(key)
                if found is not None and self.partitions.get(key) is found[0]:
                    if self.quotas is not None and answer.records and self._throttled(key):
                        self.quotas.record("follower", len(answer.records))
                    await self._handle(connection, key, found[0], found[1], answer)

    async def _connect(self) -> AsyncConnection | None:
        endpoint = self.endpoint_of(self.leader_id)
        if endpoint is None:
            return None
        connection = self._connection
        if connection is None or (connection.host, connection.port) != endpoint:
            if connection is not None:  # the leader moved to another address
                await connection.close()
            connection = self._connection = AsyncConnection(
                *endpoint, f"replica-fetcher-{self.node_id}")
        return connection

    def _request(self, fetched: dict[TopicPartition, tuple[_Fetching, PartitionLog]]) -> Any:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (fetching, target) in fetched.items():
            latest = target.leader_epoch_cache.latest_epoch()
            topics.setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": fetching.leader_epoch,
                "fetch_offset": target.log_end_offset,
                "last_fetched_epoch": -1 if latest is None else latest,
                "log_start_offset": target.log_start_offset,
                "partition_max_bytes": self.settings.partition_max_bytes})
        return build(FetchRequest, {
            "cluster_id": None, "replica_id": self.node_id, "max_wait": self.settings.wait_max_ms,
            "min_bytes": self.settings.min_bytes, "max_bytes": self.settings.response_max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""})

    # ---- one partition's answer -------------------------------------------------------------
    async def _handle(self, connection: AsyncConnection, key: TopicPartition,
                      fetching: _Fetching, target: PartitionLog, answer: Any) -> None:
        code = ErrorCode(answer.error_code)
        try:
            if code == ErrorCode.none:
                diverging = answer.diverging_epoch
                if diverging is not None and diverging.end_offset >= 0:
                    self._truncate(target, diverging.epoch, diverging.end_offset)
                    return
                self.logs.append_as_follower(target, answer.records or b"",
                                             answer.high_watermark, answer.log_start_offset)
            elif code == ErrorCode.offset_out_of_range:
                await self._reset(connection, key, fetching, target)
            else:
                log.info("%s: the leader %d answered %s; holding it back %d ms", target.name,
                         self.leader_id, code.name, self.settings.backoff_ms)
                self._hold({key: fetching}, self.settings.backoff_ms)
        except StorageError as e:
            log.error("%s: cannot apply what leader %d sent: %s", target.name, self.leader_id, e)
            self._hold({key: fetching}, self.settings.backoff_ms)

    def _truncate(self, target: PartitionLog, epoch: int, end_offset: int) -> None:
        entries = [EpochStart(e.epoch, e.start_offset)
                   for e in target.leader_epoch_cache.entries]
        where = truncation(entries, target.log_end_offset, target.high_watermark, epoch,
                           end_offset)
        log.info("%s: diverges from leader %d after epoch %d at offset %d; truncating from "
                 "%d to %d", target.name, self.leader_id, epoch, end_offset,
                 target.log_end_offset, where.offset)
        target.truncate_to(where.offset)
        # An epoch this replica began as leader and never wrote in ends here too.
        target.leader_epoch_cache.truncate_from_end(target.log_end_offset)

    async def _reset(self, connection: AsyncConnection, key: TopicPartition,
                     fetching: _Fetching, target: PartitionLog) -> None:
        """Kafka's handling of OFFSET_OUT_OF_RANGE at a follower."""
        leader_end = await self._list_offset(connection, key, fetching, LATEST)
        if leader_end is None:
            self._hold({key: fetching}, self.settings.backoff_ms)
            return
        end = target.log_end_offset
        if leader_end < end:
            log.warning("%s: the leader %d ends at %d, below this replica's end %d (an "
                        "unclean election?): truncating to it, records above are lost",
                        target.name, self.leader_id, leader_end, end)
            target.truncate_to(leader_end)
            return
        leader_start = await self._list_offset(connection, key, fetching, EARLIEST)
        if leader_start is None:
            self._hold({key: fetching}, self.settings.backoff_ms)
        elif leader_start > end:
            log.info("%s: behind the leader's log start offset %d; starting empty there",
                     target.name, leader_start)
            target.truncate_fully_and_start_at(leader_start)

    async def _list_offset(self, connection: AsyncConnection, key: TopicPartition,
                           fetching: _Fetching, timestamp: int) -> int | None:
        request = build(ListOffsetsRequest, {
            "replica_id": self.node_id, "isolation_level": 0, "topics": [{
                "name": key[0], "partitions": [{
                    "partition_index": key[1], "current_leader_epoch": fetching.leader_epoch,
                    "timestamp": timestamp}]}]})
        try:
            response = await connection.call(request, self.settings.socket_timeout_ms / 1000)
        except ConnectionError:
            return None
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.none:
            return None
        return int(answer.offset)


class ReplicaFetcherManager:
    """The fetchers of this broker. Invariants: each followed partition is in exactly the
    fetcher of (its leader, its fetcher id); fetchers run only between `start` and `stop`.
    Event-loop only."""

    def __init__(self, node_id: int, logs: FollowerLogs, endpoint_of: Endpoints,
                 settings: FetcherSettings, quotas: ReplicationQuotas | None = None) -> None:
        self.node_id, self.logs, self.endpoint_of, self.settings = \
            node_id, logs, endpoint_of, settings
        self.quotas = quotas
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int]] = {}
        self._started = False

    def fetcher_id(self, topic: str, partition: int) -> int:
        return zlib.crc32(f"{topic}-{partition}".encode()) % self.settings.num_fetchers

    def follow(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        key = (topic, partition)
        where = (leader, self.fetcher_id(topic, partition))
        before = self._assigned.get(key)
        if before is not None and before != where:
            self._fetchers[before].remove(key)
        fetcher = self._fetchers.get(where)
        if fetcher is None:
            fetcher = self._fetchers[where] = ReplicaFetcher(
                self.node_id, leader, where[1], self.logs, self.endpoint_of, self.settings,
                self.quotas)
            if self._started:
                fetcher.start()
        fetcher.add(key, leader_epoch)
        self._assigned[key] = where

    def unfollow(self, topic: str, partition: int) -> None:
        where = self._assigned.pop((topic, partition), None)
        if where is not None:
            self._fetchers[where].remove((topic, partition))

    def followed(self) -> dict[TopicPartition, int]:
        """Partition -> the leader it is fetched from."""
        return {key: where[0] for key, where in self._assigned.items()}

    def start(self) -> None:
        self._started = True
        for fetcher in self._fetchers.values():
            fetcher.start()

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(f.stop() for f in self._fetchers.values()))
