"""Sending a leader's ISR changes to the controller (Kafka's AlterPartitionManager).

Changes are batched as Kafka's are: one AlterPartition (v2) request at a time carries every
change proposed since the last was sent, partitions named by topic id, each with the leader and
partition epochs it was made at. So a broker that loses a follower of thousands of partitions
sends a few requests, the controller commits a few batches, and nothing else on the broker's
controller channel waits behind thousands of round trips. The answer decides what happens to
each change, which the leader holds as pending until then:
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
    """Invariants: one request in flight at a time; `_unsent` holds at most one change per
    partition, the newest proposed; a change is sent, and its answer applied, only while it is
    its partition's pending change. Event-loop only."""

    def __init__(self, node_id: int, call: Callable[[Any], Awaitable[Any]],
                 broker_epoch: Callable[[], int], topic_id: Callable[[str], UUID | None],
                 owner: IsrOwner) -> None:
        self.node_id, self.call, self.broker_epoch = node_id, call, broker_epoch
        self.topic_id, self.owner = topic_id, owner
        self._unsent: dict[tuple[str, int], IsrChange] = {}
        self._proposed = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    def propose(self, topic: str, partition: int, change: IsrChange) -> None:
        """Send `change` with the next request (a newer change supersedes an unsent one: the
        leader allows one at a time)."""
        self._unsent[(topic, partition)] = change
        self._proposed.set()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._run(), name=f"alter-partition-{self.node_id}")

    async def _run(self) -> None:
        while True:
            await self._proposed.wait()
            self._proposed.clear()
            batch = self._take_unsent()
            if batch and await self._send(batch):
                continue  # what was proposed meanwhile goes now
            if self._unsent:  # kept after a failure, or waiting for its topic id
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._proposed.set()

    def _take_unsent(self) -> dict[tuple[str, int], IsrChange]:
        """The unsent changes still pending; those whose topic id is not known yet stay."""
        batch: dict[tuple[str, int], IsrChange] = {}
        for key, change in list(self._unsent.items()):
            if self.owner.pending_isr_change(*key) != change:
                del self._unsent[key]
            elif self.topic_id(key[0]) is not None:
                batch[key] = self._unsent.pop(key)
        return batch

    async def _send(self, batch: dict[tuple[str, int], IsrChange]) -> bool:
        """One request for `batch`; whether every change in it was settled (else what is
        still pending was kept for the next)."""
        ids = {topic: self.topic_id(topic) for topic, _ in batch}
        try:
            response = await self.call(self._request(batch, ids))
        except Exception as e:  # no controller, or none in time: try again
            log.info("%d ISR changes not answered: %s", len(batch), e)
            return self._keep(batch)
        if response.error_code != ErrorCode.none:
            log.info("AlterPartition of %d ISR changes failed: %s", len(batch),
                     ErrorCode(response.error_code).name)
            return self._keep(batch)
        names = {topic_id: topic for topic, topic_id in ids.items()}
        unsettled = dict(batch)
        for t in response.topics:
            for p in t.partitions:
                key = (names.get(t.topic_id), p.partition_index)
                if key in unsettled and self._settle(key[0], p, unsettled[key]):
                    del unsettled[key]
        return self._keep(unsettled)

    def _settle(self, topic: str, answer: Any, change: IsrChange) -> bool:
        """Apply one partition's answer; False when the change stays pending."""
        partition, code = answer.partition_index, ErrorCode(answer.error_code)
        if self.owner.pending_isr_change(topic, partition) != change:
            return True  # superseded while in flight: the newer change decides
        if code == ErrorCode.none:
            self.owner.isr_change_committed(topic, partition, tuple(answer.isr),
                                            answer.partition_epoch)
            return True
        if code in _REFUSED:
            log.info("%s-%d: the controller refused ISR %s: %s", topic, partition,
                     list(change.isr), code.name)
            self.owner.isr_change_refused(topic, partition, change)
            return True
        log.debug("%s-%d: ISR %s answered %s; kept pending", topic, partition,
                  list(change.isr), code.name)
        return False

    def _keep(self, changes: dict[tuple[str, int], IsrChange]) -> bool:
        """Put back what is still pending (unless a newer change came); True if nothing."""
        for key, change in changes.items():
            if self.owner.pending_isr_change(*key) == change:
                self._unsent.setdefault(key, change)
        return not changes

    def _request(self, batch: dict[tuple[str, int], IsrChange],
                 ids: dict[str, UUID | None]) -> AlterPartitionRequest:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), change in batch.items():
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "leader_epoch": change.leader_epoch,
                "new_isr": list(change.isr), "leader_recovery_state": RECOVERED,
                "partition_epoch": change.partition_epoch})
        return build(AlterPartitionRequest, {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "topics": [{"topic_id": ids[topic], "partitions": partitions}
                       for topic, partitions in by_topic.items()]})

    async def stop(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        self._sender = None
        self._unsent.clear()
