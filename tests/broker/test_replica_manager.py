"""The replica manager on real partition logs, driven as the metadata publisher and the fetch
handler drive it, with a manual clock: the high watermark waits for every ISR member, acks=all
answers with Kafka's errors, a follower whose last fetched epoch ends earlier at the leader is
told where it diverges, a caught-up follower is proposed for the ISR, a lagging one for removal,
and leadership moving releases what waits."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from spark_log.broker.errors import KafkaError
from spark_log.broker.replication.replica_manager import ReplicaManager, ReplicationSettings
from spark_log.clock import ManualClock
from spark_log.metadata import PartitionRegistration
from spark_log.protocol import ErrorCode
from spark_log.records import Record, build_batch
from spark_log.replication.leader_partition import IsrChange
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.log.log_config import DEFAULT_CONFIG
from spark_log.storage.log.log_manager import LogManager

TOPIC = "t"
LAG_MS = 10_000


class Proposals:
    def __init__(self) -> None:
        self.changes: list[tuple[str, int, IsrChange]] = []

    def propose(self, topic: str, partition: int, change: IsrChange) -> None:
        self.changes.append((topic, partition, change))


def batch(*values: bytes) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)])


@pytest.fixture
def setup(tmp_path: Path) -> tuple[ReplicaManager, ManualClock, Proposals]:
    clock = ManualClock()
    logs = LogManager(str(tmp_path), clock=clock, new_dir=True,
                      default_config=dataclasses.replace(DEFAULT_CONFIG, min_insync_replicas=2))
    logs.get_or_create(TOPIC, 0)
    replicas = ReplicaManager(logs, 1, clock, ReplicationSettings(LAG_MS))
    proposals = Proposals()
    replicas.isr_changes = proposals
    return replicas, clock, proposals


def lead(replicas: ReplicaManager, isr: tuple[int, ...] = (1, 2, 3), leader_epoch: int = 0,
         partition_epoch: int = 0) -> None:
    replicas.update_partition(TOPIC, 0, PartitionRegistration(
        replicas=(1, 2, 3), isr=isr, leader=1, leader_epoch=leader_epoch,
        partition_epoch=partition_epoch))


def test_the_high_watermark_waits_for_every_isr_member(setup) -> None:  # type: ignore[no-untyped-def]
    replicas, _, _ = setup
    lead(replicas)
    replicas.append(TOPIC, 0, batch(b"a", b"b"))
    log = replicas.log(TOPIC, 0)
    assert (log.log_end_offset, log.high_watermark) == (2, 0)
    replicas.read_for_follower(TOPIC, 0, 2, 2, 0, 1 << 20, True)
    assert log.high_watermark == 0  # follower 3 has not fetched past it
    replicas.read_for_follower(TOPIC, 0, 3, 1, 0, 1 << 20, True)
    assert log.high_watermark == 1
    replicas.read_for_follower(TOPIC, 0, 3, 2, 0, 1 << 20, True)
    assert log.high_watermark == 2


def test_acks_all_answers_once_replicated_and_refuses_below_min_isr(setup) -> None:  # type: ignore[no-untyped-def]
    replicas, _, _ = setup

    async def run() -> list[int]:
        lead(replicas, isr=(1, 2))
        info = replicas.append(TOPIC, 0, batch(b"x"), required_acks=-1)
        waiting = asyncio.ensure_future(
            replicas.until_replicated(TOPIC, 0, info.last_offset + 1, 5.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        replicas.read_for_follower(TOPIC, 0, 2, 1, 0, 1 << 20, True)
        first = await waiting
        timed_out = await replicas.until_replicated(TOPIC, 0, 5, 0.01)
        return [first, timed_out]

    assert asyncio.run(run()) == [ErrorCode.none, ErrorCode.request_timed_out]
    lead(replicas, isr=(1,), partition_epoch=1)
    with pytest.raises(KafkaError) as refused:
        replicas.append(TOPIC, 0, batch(b"y"), required_acks=-1)
    assert refused.value.code == ErrorCode.not_enough_replicas
    replicas.append(TOPIC, 0, batch(b"y"), required_acks=1)  # acks=1 is not refused


def test_a_follower_whose_epoch_ends_earlier_here_is_told_where(setup) -> None:  # type: ignore[no-untyped-def]
    replicas, _, _ = setup
    lead(replicas, leader_epoch=0)
    replicas.append(TOPIC, 0, batch(b"a", b"b", b"c"))
    lead(replicas, leader_epoch=2, partition_epoch=1)  # a new epoch begins at offset 3
    replicas.append(TOPIC, 0, batch(b"d"))
    # The follower wrote epoch 1 (as a leader this one never knew) up to offset 5.
    read = replicas.read_for_follower(TOPIC, 0, 2, 5, 1, 1 << 20, True)
    assert read.diverging == (0, 3)
    assert read.records.size == 0
    # Its log matches up to epoch 0's end: no divergence, records from there.
    read = replicas.read_for_follower(TOPIC, 0, 2, 3, 0, 1 << 20, True)
    assert read.diverging is None and read.records.size > 0


def test_isr_changes_are_proposed_for_caught_up_and_lagging_followers(setup) -> None:  # type: ignore[no-untyped-def]
    replicas, clock, proposals = setup
    lead(replicas, isr=(1, 2))
    replicas.append(TOPIC, 0, batch(b"a"))
    replicas.read_for_follower(TOPIC, 0, 2, 1, 0, 1 << 20, True)  # high watermark 1
    replicas.read_for_follower(TOPIC, 0, 3, 1, 0, 1 << 20, True)  # 3 caught up: join
    assert [c.isr for _, _, c in proposals.changes] == [(1, 2, 3)]
    replicas.isr_change_committed(TOPIC, 0, (1, 2, 3), 1)
    clock.advance(LAG_MS + 1)
    replicas.read_for_follower(TOPIC, 0, 3, 1, 0, 1 << 20, True)  # 3 keeps up, 2 does not
    replicas.shrink_isrs()
    assert [c.isr for _, _, c in proposals.changes] == [(1, 2, 3), (1, 3)]


def test_leadership_moving_away_releases_acks_all_waiters(setup) -> None:  # type: ignore[no-untyped-def]
    replicas, _, _ = setup

    async def run() -> int:
        lead(replicas)
        info = replicas.append(TOPIC, 0, batch(b"x"), origin=AppendOrigin.CLIENT)
        waiting = asyncio.ensure_future(
            replicas.until_replicated(TOPIC, 0, info.last_offset + 1, 5.0))
        await asyncio.sleep(0)
        replicas.update_partition(TOPIC, 0, PartitionRegistration(
            replicas=(1, 2, 3), isr=(2, 3), leader=2, leader_epoch=1, partition_epoch=1))
        return await waiting

    assert asyncio.run(run()) == ErrorCode.not_leader_or_follower
