"""What a proposal's wait is told, driven by a real replica's committed batches: the outcome of
the proposal at its offset, never an outcome kept for an earlier proposal there."""

from __future__ import annotations

import asyncio
import random

import pytest

from spark_log.controller.quorum_errors import ProposalLostError
from spark_log.controller.raft_delivery import Delivery
from spark_log.raft.config import QuorumConfig
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import Batch
from spark_log.raft.replica import RaftReplica
from spark_log.raft.replicated_log import ReplicatedLog


def lone_leader(log: ReplicatedLog, epoch: int) -> RaftReplica:
    """A lone voter restarted in `epoch` on `log`: it leads the next epoch at once and commits
    its epoch-start record and everything before it."""
    replica = RaftReplica(1, QuorumConfig(frozenset({1})), ElectionState(epoch), log, None, 0,
                          random.Random(7))
    replica.tick(0)
    assert replica.is_leader and replica.epoch == epoch + 1
    return replica


def deliver(delivery: Delivery, replica: RaftReplica) -> None:
    delivery.committed()
    delivery.deliver(replica)


def test_an_offset_proposed_again_gets_its_own_outcome_not_the_earlier_loss() -> None:
    async def scenario() -> None:
        log = ReplicatedLog()
        log.append(Batch(0, 1, (b"a",)))
        delivery = Delivery(applied=0)
        delivery.proposed(2, 1)  # proposed in epoch 1 past what the new leader holds
        lost = asyncio.ensure_future(delivery.wait(2))
        leader = lone_leader(log, epoch=2)  # its epoch-start record goes at offset 1
        deliver(delivery, leader)
        with pytest.raises(ProposalLostError, match="offset 2 in epoch 1 were replaced"):
            await lost
        offset, _ = leader.propose([b"b"], 1)  # lands at offset 2 again, in epoch 3
        assert offset == 2
        delivery.proposed(offset, leader.epoch)
        waiting = asyncio.ensure_future(delivery.wait(offset))
        await asyncio.sleep(0)
        assert not waiting.done()  # the loss kept for epoch 1's proposal is not its answer
        deliver(delivery, leader)
        await waiting  # committed
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_wait_for_an_earlier_proposal_at_an_offset_proposed_again_ends_unknown() -> None:
    async def scenario() -> None:
        delivery = Delivery(applied=0)
        delivery.proposed(5, 2)
        earlier = asyncio.ensure_future(delivery.wait(5))
        await asyncio.sleep(0)
        delivery.proposed(5, 4)
        with pytest.raises(ProposalLostError, match=r"epoch 2 .* not known"):
            await earlier
        later = asyncio.ensure_future(delivery.wait(5))
        await asyncio.sleep(0)
        assert not later.done()
        later.cancel()
    asyncio.run(asyncio.wait_for(scenario(), 10))
