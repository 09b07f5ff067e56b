"""The broker's AlterPartitionManager against a real controller (a lone voter on real files):
ISR changes proposed together reach the controller as one AlterPartition request, as Kafka's
manager batches them, and each partition is settled by its own answer; the answer to a change
superseded while its request was in flight is not applied, and the newer change goes next."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from spark_log.broker.replication.alter_partition_manager import AlterPartitionManager
from spark_log.protocol import ErrorCode
from spark_log.replication.leader_partition import IsrChange
from tests.controller.controller_harness import LoneController, create_topics, unfenced_broker
from tests.controller.support import eventually

PARTITIONS = 30


class Leader:
    """The replica manager's side: the pending change of each partition, and the answers."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, int], IsrChange] = {}
        self.committed: dict[tuple[str, int], tuple[int, ...]] = {}
        self.refused: list[tuple[str, int]] = []

    def pending_isr_change(self, topic: str, partition: int) -> IsrChange | None:
        return self.pending.get((topic, partition))

    def isr_change_committed(self, topic: str, partition: int, isr: tuple[int, ...],
                             partition_epoch: int) -> None:
        del self.pending[(topic, partition)]
        self.committed[(topic, partition)] = isr

    def isr_change_refused(self, topic: str, partition: int, change: IsrChange) -> None:
        del self.pending[(topic, partition)]
        self.refused.append((topic, partition))


def test_changes_proposed_together_go_in_one_request_and_each_is_settled(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        lone = LoneController(tmp_path)
        controller = await lone.start()
        try:
            epochs = {b: await unfenced_broker(controller, b) for b in (1, 2, 3)}
            created = await controller.handle(create_topics("t", partitions=PARTITIONS,
                                                            factor=3))
            assert created.topics[0].error_code == ErrorCode.none
            topic = controller.image.topic("t")
            assert topic is not None
            asked: list[Any] = []
            led = {p: s for p, s in topic.partitions.items() if s.leader == 1}
            assert len(led) >= 2
            first = next(iter(led))
            newer = IsrChange((1,), led[first].leader_epoch, led[first].partition_epoch)

            async def call(request: Any) -> Any:
                asked.append(request)
                if len(asked) == 1:  # superseded while this request is in flight
                    leader.pending[("t", first)] = newer
                    manager.propose("t", first, newer)
                return await controller.handle(request)

            leader = Leader()
            manager = AlterPartitionManager(1, call, lambda: epochs[1],
                                            lambda name: topic.id if name == "t" else None,
                                            leader)
            for p, state in led.items():  # every partition broker 1 leads drops broker 3
                change = IsrChange(tuple(b for b in state.isr if b != 3), state.leader_epoch,
                                   state.partition_epoch)
                leader.pending[("t", p)] = change
                manager.propose("t", p, change)
            await eventually(lambda: len(leader.committed) == len(led) - 1 and
                             len(asked) >= 2, 10, "the changes to be settled")
            sizes = [sum(len(t.partitions) for t in r.topics) for r in asked]
            assert sizes[:2] == [len(led), 1]  # all at once; then the superseding change alone
            # The superseded change's answer was not applied; the newer one, made at the
            # partition epoch the first answer moved on from, stays pending until the leader's
            # metadata settles it (it is neither committed nor dropped).
            assert ("t", first) not in leader.committed and not leader.refused
            assert leader.pending == {("t", first): newer}
            for p in led:
                if p != first:
                    assert controller.image.partition("t", p).isr == leader.committed[("t", p)]
            await manager.stop()
        finally:
            await lone.close()
    asyncio.run(asyncio.wait_for(scenario(), 60))
