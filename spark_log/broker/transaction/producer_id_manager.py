"""Producer ids, unique in the cluster and never reused (Kafka's RPCProducerIdManager): the broker
hands them out from blocks the active controller allocates (AllocateProducerIds, committed in
the metadata log before the block is given), asking for the next block once 90% of the current
one is used, so InitProducerId seldom waits for the controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from spark_log.broker.errors import KafkaError
from spark_log.deadline import within
from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build

log = logging.getLogger(__name__)

PREFETCH_FRACTION = 0.9  # Kafka's RPCProducerIdManager asks for the next block at 90%
RETRY_BACKOFF_S = 0.05

Call = Callable[[object], Awaitable[object]]


class ProducerIdManager:
    """Invariant: every id returned lies in a block the controller committed for this broker,
    and above every id returned before by this object. Event-loop thread only."""

    def __init__(self, call: Call, node_id: int, broker_epoch: Callable[[], int]) -> None:
        self._call, self.node_id, self._broker_epoch = call, node_id, broker_epoch
        self._next = self._end = 0  # the current block: [next, end)
        self._prefetch_at = 0
        self._queued: tuple[int, int] | None = None  # the next block, once allocated
        self._fetching: asyncio.Task[None] | None = None

    @property
    def available(self) -> int:
        return self._end - self._next + (self._queued[1] - self._queued[0] if self._queued else 0)

    async def ready(self, timeout_s: float = 30.0) -> None:
        """Until an id can be handed out without waiting (call `next_id` before the next
        await); KafkaError COORDINATOR_LOAD_IN_PROGRESS (retriable) when the controller gave
        none in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.available == 0:
            if loop.time() >= deadline:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 "no producer id block from the controller yet")
            await within(deadline - loop.time(), asyncio.shield(self._fetch()))

    def next_id(self) -> int:
        if self._next >= self._end:
            if self._queued is None:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 "no producer id block from the controller yet")
            (self._next, self._end), self._queued = self._queued, None
            self._prefetch_at = self._next + int((self._end - self._next) * PREFETCH_FRACTION)
        producer_id = self._next
        self._next += 1
        if self._next >= self._prefetch_at and self._queued is None:
            self._fetch()
        return producer_id

    def _fetch(self) -> asyncio.Task[None]:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._allocate())
        return self._fetching

    async def _allocate(self) -> None:
        request = build(_request_type(), {"broker_id": self.node_id,
                                          "broker_epoch": self._broker_epoch()})
        try:
            response = await self._call(request)
        except Exception as e:  # the controller unreachable: the next ready() asks again
            log.info("Broker %d: no producer id block: %s", self.node_id, e)
            await asyncio.sleep(RETRY_BACKOFF_S)
            return
        code = ErrorCode(response.error_code)  # type: ignore[attr-defined]
        if code != ErrorCode.none:
            log.info("Broker %d: the controller allocated no producer ids: %s", self.node_id,
                     code.name)
            await asyncio.sleep(RETRY_BACKOFF_S)
            return
        start, length = response.producer_id_start, response.producer_id_len  # type: ignore[attr-defined]
        self._queued = (start, start + length)


def _request_type() -> type:
    from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest

    return AllocateProducerIdsRequest
