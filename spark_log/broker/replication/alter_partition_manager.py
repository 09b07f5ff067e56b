"""Sending a leader's ISR changes to the controller (Kafka's AlterPartitionManager).

Each change is one AlterPartition (v2) request naming the partition by topic id, with the leader
and partition epochs the change was made at. The answer decides what happens to the change,
which the leader holds as pending until then:
* committed (no error): the ISR takes effect now (the metadata will say the same);
* refused for good at the epochs it names (INELIGIBLE_REPLICA, INVALID_REQUEST, an unknown
  topic or partition): dropped, so the leader may propose again;
* no answer, or refused because the partition or leader epoch moved on (the change may have been
  committed, or a newer one was): kept pending — the maximal ISR keeps counting it — and sent
  again after a back-off while it is still the leader's pending change; the metadata, when it
  catches up, settles it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from uuid import UUID

from kio.schema.alter_partition.v2.request import AlterPartitionRequest

from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build
from spark_log.replication.leader_partition import IsrChange

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.5
RECOVERED = 0  # leader_recovery_state: this leader is not recovering from an unclean election
_REFUSED = frozenset({ErrorCode.ineligible_replica, ErrorCode.invalid_request,
                      ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id,
                      ErrorCode.operation_not_attempted})


class IsrOwner(Protocol):
    """The replica manager, as far as ISR changes concern it."""

    def pending_isr_change(self, topic: str, partition: int) -> IsrChange | None: ...

    def isr_change_committed(self, topic: str, partition: int, isr: tuple[int, ...],
                             partition_epoch: int) -> None: ...

    def isr_change_refused(self, topic: str, partition: int, change: IsrChange) -> None: ...


class AlterPartitionManager:
    """Invariant: at most one sender per partition; a sender stops once its change is no
    longer the partition's pending one. Event-loop only."""

    def __init__(self, node_id: int, call: Callable[[Any], Awaitable[Any]],
                 broker_epoch: Callable[[], int], topic_id: Callable[[str], UUID | None],
                 owner: IsrOwner) -> None:
        self.node_id, self.call, self.broker_epoch = node_id, call, broker_epoch
        self.topic_id, self.owner = topic_id, owner
        self._senders: dict[tuple[str, int], asyncio.Task[None]] = {}

    def propose(self, topic: str, partition: int, change: IsrChange) -> None:
        key = (topic, partition)
        running = self._senders.get(key)
        if running is not None and not running.done():
            running.cancel()  # a newer change supersedes it (the leader allows one at a time)
        self._senders[key] = asyncio.create_task(self._send(topic, partition, change))

    async def _send(self, topic: str, partition: int, change: IsrChange) -> None:
        while self.owner.pending_isr_change(topic, partition) == change:
            answer = await self._ask(topic, partition, change)
            if answer is None:
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.none:
                self.owner.isr_change_committed(topic, partition, tuple(answer.isr),
                                                answer.partition_epoch)
                return
            if code in _REFUSED:
                log.info("%s-%d: the controller refused ISR %s: %s", topic, partition,
                         list(change.isr), code.name)
                self.owner.isr_change_refused(topic, partition, change)
                return
            log.debug("%s-%d: ISR %s answered %s; kept pending", topic, partition,
                      list(change.isr), code.name)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _ask(self, topic: str, partition: int, change: IsrChange) -> Any | None:
        topic_id = self.topic_id(topic)
        if topic_id is None:
            return None
        request = build(AlterPartitionRequest, {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition_index": partition, "leader_epoch": change.leader_epoch,
                "new_isr": list(change.isr), "leader_recovery_state": RECOVERED,
                "partition_epoch": change.partition_epoch}]}]})
        try:
            response = await self.call(request)
        except Exception as e:  # no controller, or none in time: try again
            log.info("%s-%d: ISR change not answered: %s", topic, partition, e)
            return None
        if response.error_code != ErrorCode.none:
            log.info("%s-%d: AlterPartition failed: %s", topic, partition,
                     ErrorCode(response.error_code).name)
            return None
        for t in response.topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p
        return None

    async def stop(self) -> None:
        for task in self._senders.values():
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        self._senders.clear()
