"""The partitions this broker leads, and waiting for data (Kafka's ReplicaManager + purgatory).

On a single broker every partition is led here with leader epoch 0 and an ISR of this broker
alone, so an append is committed as soon as it is written: the high watermark moves to the log
end offset at once, which satisfies acks=1 and acks=all alike. A fetch that found too little
data parks a future per partition it reads; an append to one of them wakes it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from spark_log.broker.errors import UnknownTopicError
from spark_log.broker.replication.leader_epochs import LEADER_EPOCH
from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.log.file_records import FetchSlice, slice_next_offset
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

TopicPartition = tuple[str, int]


class ReplicaManager:
    """Appends and reads partition logs; wakes parked fetches on append.

    Invariant: after every append the high watermark equals the log end offset (one replica).
    Not thread-safe: used from the broker's event loop only.
    """

    def __init__(self, logs: LogManager, node_id: int) -> None:
        self.logs = logs
        self.node_id = node_id
        self._waiting: defaultdict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    def become_leader(self) -> None:
        """Lead every partition. The ISR is this broker alone, so everything in the log is
        committed: the high watermark starts at the log end offset (a crash can leave the
        checkpointed one behind)."""
        for partition_log in self.logs.logs():
            partition_log.update_high_watermark(partition_log.log_end_offset)

    def log(self, topic: str, partition: int) -> PartitionLog:
        found = self.logs.get(topic, partition)
        if found is None:
            raise UnknownTopicError(f"{topic}-{partition}")
        return found

    def append(self, topic: str, partition: int, records: bytes | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        target = self.log(topic, partition)
        info = target.append(records, leader_epoch=LEADER_EPOCH, origin=origin)
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
