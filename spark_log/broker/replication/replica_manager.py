"""The partitions this broker hosts, and waiting for data (Kafka's ReplicaManager + purgatory).

Each hosted partition's state — leader, leader epoch, replicas, ISR — comes from the cluster
metadata (`update_partition`, called by the metadata publisher). Appends and reads go to the
leader only: elsewhere they fail with NOT_LEADER_OR_FOLLOWER naming the current leader
(KIP-951); appends carry the partition's leader epoch. Until replication exists, a leader
commits what it writes at once: its high watermark is its log end offset. A fetch that found
too little data parks a future per partition it reads; an append to one of them wakes it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from spark_log.broker.errors import UnknownTopicError
from spark_log.broker.replication.leader_epochs import NotLeaderError, check_leader_epoch
from spark_log.metadata import PartitionRegistration
from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.log.file_records import FetchSlice, slice_next_offset
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

TopicPartition = tuple[str, int]


class ReplicaManager:
    """Appends and reads partition logs; wakes parked fetches on append.

    Invariants: a partition is appended to and read only while the metadata says this broker
    leads it; a leader's high watermark equals its log end offset after every append (until
    replication exists). Not thread-safe: used from the broker's event loop only.
    """

    def __init__(self, logs: LogManager, node_id: int) -> None:
        self.logs = logs
        self.node_id = node_id
        self._states: dict[TopicPartition, PartitionRegistration] = {}
        self._waiting: defaultdict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    # ---- leadership, from the metadata -----------------------------------------------------
    def update_partition(self, topic: str, partition: int, state: PartitionRegistration) -> None:
        previous = self._states.get((topic, partition))
        self._states[(topic, partition)] = state
        if state.leader == self.node_id:
            found = self.logs.get(topic, partition)
            if found is not None:  # everything it holds is committed (no replication yet)
                found.update_high_watermark(found.log_end_offset)
        elif previous is not None and previous.leader == self.node_id:
            self._wake((topic, partition))  # parked fetches find out it moved

    def forget_partition(self, topic: str, partition: int) -> None:
        if self._states.pop((topic, partition), None) is not None:
            self._wake((topic, partition))

    def state(self, topic: str, partition: int) -> PartitionRegistration:
        found = self._states.get((topic, partition))
        if found is None:
            raise UnknownTopicError(f"{topic}-{partition}")
        return found

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.state(topic, partition).leader_epoch

    def check_leader_epoch(self, topic: str, partition: int, current: int) -> None:
        check_leader_epoch(current, self.leader_epoch(topic, partition))

    # ---- the leader's log ------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads."""
        state = self.state(topic, partition)
        if state.leader != self.node_id:
            raise NotLeaderError(topic, partition, state.leader, state.leader_epoch)
        found = self.logs.get(topic, partition)
        if found is None:
            raise UnknownTopicError(f"{topic}-{partition}")
        return found

    def append(self, topic: str, partition: int, records: bytes | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        target = self.log(topic, partition)
        epoch = self._states[(topic, partition)].leader_epoch
        info = target.append(records, leader_epoch=epoch, origin=origin)
        target.update_high_watermark(target.log_end_offset)
        self._wake((topic, partition))
        return info

    def last_stable_offset(self, target: PartitionLog) -> int:
        """The offset below which no transaction is open (at most the high watermark)."""
        return target.last_stable_offset

    def aborted_transactions(self, target: PartitionLog, fetch_offset: int, records: FetchSlice
                             ) -> list[dict[str, int]]:
        """(producer id, first offset) of the aborted transactions overlapping the batches a
        read_committed fetch returns, for the consumer to drop their records."""
        if records.size == 0:
            return []
        end = slice_next_offset(records)
        if end is None:  # unreadable slice: a looser bound lists more, never fewer
            end = target.last_stable_offset
        return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                for t in target.aborted_transactions(fetch_offset, end)]

    async def wait_for_append(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of `partitions` is appended to, or after `timeout_s`."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        # A timer instead of asyncio.wait_for: cancelling the fetch (shutdown) must never be
        # swallowed by a timeout firing at the same moment.
        timer = loop.call_later(timeout_s, _resolve, waiter)
        keys = list(partitions)
        for key in keys:
            self._waiting[key].add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiting[key]

    def _wake(self, key: TopicPartition) -> None:
        waiters = self._waiting.pop(key, None)
        if waiters:
            for waiter in waiters:
                _resolve(waiter)

    def wake_all(self) -> None:
        """Release every parked fetch (shutdown, topic deletion)."""
        for key in list(self._waiting):
            self._wake(key)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
