"""Shared helpers of the group coordinator tests (no tests here): an in-process broker on a
ManualClock — the real coordinator, storage and __consumer_offsets, with time moved by hand."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.group.group_coordinator import GroupCoordinator
from spark_log.broker.group.group_metadata_records import (
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from spark_log.broker.group.group_requests import JoinRequest, SyncRequest
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.broker.node import Node
from spark_log.clock import ManualClock
from spark_log.protocol import ErrorCode
from spark_log.records import iter_batches

LOAD_TIMEOUT_S = 10.0


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class GroupHarness:
    def __init__(self, node: Node, clock: ManualClock) -> None:
        assert node.broker is not None
        self.broker = node.broker
        self.clock = clock

    @property
    def coord(self) -> GroupCoordinator:
        return self.broker.groups

    def tick(self, ms: int) -> None:
        """Move time on and run the timeouts that fell due."""
        self.clock.advance(ms)
        self.coord.timer.run_due()

    async def settle(self) -> None:
        """Let requests just sent reach the coordinator, then let a new group's initial
        rebalance delay (3 s, extended once when more members came) pass. Nothing is due
        before time moves, so the test orders every join."""
        await asyncio.sleep(0)
        self.tick(3000)
        self.tick(3000)
        await asyncio.sleep(0)

    def join(self, group: str, member: str = "", instance: str | None = None,
             topics: Sequence[str] = ("t",), protocols: Sequence[str] = ("range",),
             session: int = 10_000, rebalance: int = 60_000, version: int = 5,
             client: str = "client") -> asyncio.Task[dict[str, Any]]:
        request = JoinRequest(group, member, instance, "consumer",
                              tuple((p, subscription(*topics)) for p in protocols), session,
                              rebalance, client, "/127.0.0.1", version)
        return asyncio.create_task(self.coord.join_group(request))

    async def join_new(self, group: str, **kw: Any) -> asyncio.Task[dict[str, Any]]:
        """A dynamic member's two JoinGroups (MEMBER_ID_REQUIRED, then with its id)."""
        first = await self.join(group, **kw)
        assert first["error_code"] == 79, first  # MEMBER_ID_REQUIRED
        task = self.join(group, member=first["member_id"], **kw)
        await asyncio.sleep(0)
        return task

    def sync(self, group: str, member: str, generation: int,
             assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> asyncio.Task[dict[str, Any]]:
        request = SyncRequest(group, member, instance, generation, "consumer", None,
                              assignments or {})
        return asyncio.create_task(self.coord.sync_group(request))

    def records(self, group: str) -> list[tuple[Any, Any]]:
        """(key, value) of every record of the group's __consumer_offsets partition."""
        log = self.broker.replicas.log(OFFSETS_TOPIC, self.coord.partition_for(group))
        data = log.read(log.log_start_offset, 1 << 30).read_bytes()
        out = []
        for batch in iter_batches(data):
            if batch.header.is_control:
                out.append(("control", batch.header.producer_id))
                continue
            for record in batch.records():
                key = decode_key(record.key)
                value = record.value
                if value is not None:
                    value = decode_offset_commit_value(value) \
                        if isinstance(key, OffsetCommitKey) else decode_group_metadata_value(value)
                out.append((key, value))
        return out

    async def until_loaded(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOAD_TIMEOUT_S
        every = set(range(self.coord.state.partitions))
        while not (self.coord.loaded() and self.coord.state.loaded == every):
            assert loop.time() < deadline, "coordinator did not load"
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running_broker(data_dir: Path, clock: ManualClock, loaded: bool = True, **config: str
                         ) -> AsyncIterator[GroupHarness]:
    """A node on `data_dir`; with `loaded`, once __consumer_offsets exists and is loaded."""
    props = {"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
             "offsets.topic.num.partitions": "5",
             **{k.replace("_", "."): v for k, v in config.items()}}
    node = Node(BrokerConfig.from_properties(props), clock=clock)
    await node.start()
    try:
        assert node.broker is not None
        # As a client's FindCoordinator would: __consumer_offsets exists and is loaded.
        harness = GroupHarness(node, clock)
        if loaded:
            found = await node.broker.groups.find_coordinator("probe")
            assert found[0] == ErrorCode.none
            await harness.until_loaded()
        yield harness
    finally:
        await node.stop()
