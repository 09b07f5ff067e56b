"""Quorum replicas in one process on real files and loopback sockets: each node is a
`RaftDriver` behind a small asyncio server that reads Kafka frames and hands quorum requests to
its driver (the broker's `Connection` does the framing), and an application that applies the
committed records in order and snapshots them as RecordBatches.

Everything is awaited with bounded deadlines (`eventually`), never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spark_log.broker.server.connection import Connection, Peer
from spark_log.controller import raft_codec
from spark_log.controller.quorum_channel import Address
from spark_log.controller.raft_driver import RaftDriver
from spark_log.protocol import ProtocolError, encode_response
from spark_log.raft.config import QuorumConfig
from spark_log.raft.messages import Batch, OffsetAndEpoch

from .support import eventually, snapshot_bytes, snapshot_state

CLUSTER_ID = "J8qXZq2hRvCk1v3wT0q2Ag"

# Small timeouts, so elections take a fraction of a second.
FAST = {"election_timeout_ms": 150, "election_backoff_max_ms": 100, "fetch_timeout_ms": 300,
        "request_timeout_ms": 250, "retry_backoff_ms": 20, "fetch_max_wait_ms": 50,
        "snapshot_chunk_bytes": 512}


@dataclass
class App:
    """The application above the quorum: the committed records, applied in order."""

    records: list[tuple[int, bytes]] = field(default_factory=list)
    next_offset: int = 0
    last_epoch: int = 0
    snapshots_loaded: int = 0

    def on_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            assert batch.base_offset == self.next_offset, (batch, self.next_offset)
            if not batch.control:
                self.records += [(batch.base_offset + i, r) for i, r in enumerate(batch.records)]
            self.next_offset, self.last_epoch = batch.next_offset, batch.epoch

    def on_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.records = [(o, r.encode()) for o, r in snapshot_state(data)]  # type: ignore
        self.next_offset, self.last_epoch = snapshot_id
        self.snapshots_loaded += 1

    def snapshot(self) -> tuple[OffsetAndEpoch, bytes]:
        state = [(o, r.decode()) for o, r in self.records]
        return OffsetAndEpoch(self.next_offset, self.last_epoch), snapshot_bytes(state)

    @property
    def values(self) -> list[bytes]:
        return [r for _, r in self.records]


class Node:
    """One replica: its directory, port, driver, server and application."""

    def __init__(self, node_id: int, directory: Path, config: QuorumConfig,
                 segment_bytes: int) -> None:
        self.node_id, self.directory, self.config = node_id, directory, config
        self.segment_bytes = segment_bytes
        # What else listens to the node's driver: called with it before it starts.
        self.attach: Callable[[RaftDriver], None] | None = None
        self.port = 0
        self.driver: RaftDriver | None = None
        self.app = App()
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()

    async def listen(self) -> None:
        self._server = await asyncio.get_running_loop().create_server(
            self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def start(self, addresses: dict[int, Address], seed: int) -> None:
        self.app = App()
        driver = self.driver = RaftDriver(
            self.node_id, self.config, self.directory, cluster_id=CLUSTER_ID,
            addresses=addresses, rng=random.Random(seed), segment_bytes=self.segment_bytes)
        driver.on_commit(self.app.on_commit)
        driver.on_snapshot(self.app.on_snapshot)
        if self.attach is not None:
            self.attach(driver)
        await driver.start()
        if self._server is None:
            await self.listen()

    async def kill(self) -> None:
        """Stop abruptly: the driver's tasks cancelled, nothing flushed beyond what its actions
        flushed, the server and its connections gone."""
        if self.driver is not None:
            await self.driver.abort()
        await self._stop_serving()

    async def stop(self) -> None:
        if self.driver is not None:
            await self.driver.resign(1.0)
            await self.driver.close()
        await self._stop_serving()

    async def cut_off(self) -> None:
        """Nobody reaches this node any more (its own requests still go out)."""
        await self._stop_serving()

    async def _stop_serving(self) -> None:
        """Stop listening and cut every connection (their tasks then end on their own)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for connection in list(self._connections):
            connection.abort()
        await eventually(lambda: not self._connections, 5, "connections to end")

    def _accept(self) -> Connection:
        connection = Connection(self._respond, 64 << 20, on_closed=self._connections.discard)
        self._connections.add(connection)
        return connection

    async def _respond(self, frame: memoryview, peer: Peer) -> list[bytes] | None:
        header, request = raft_codec.read_request(frame)  # ProtocolError closes the connection
        driver = self.driver
        if driver is None:
            raise ProtocolError("no driver")
        response = await driver.handle_request(request)
        return None if response is None else [encode_response(header.correlation_id, response)]


class Quorum:
    """`size` voters (ids 1..size) and `observers` observers (the next ids) in `root`, each
    in its own directory."""

    def __init__(self, root: Path, size: int = 3, observers: int = 0,
                 segment_bytes: int = 1 << 20, **config: int) -> None:
        settings = {**FAST, **config}
        self.config = QuorumConfig(frozenset(range(1, size + 1)), **settings)
        self.nodes = {i: Node(i, root / f"node-{i}", self.config, segment_bytes)
                      for i in range(1, size + observers + 1)}
        self._seed = 0

    @property
    def addresses(self) -> dict[int, Address]:
        return {i: Address("127.0.0.1", n.port) for i, n in self.nodes.items()}

    async def start(self) -> None:
        for node in self.nodes.values():
            await node.listen()
        for node in self.nodes.values():
            await self.restart(node.node_id)

    async def restart(self, node_id: int) -> None:
        self._seed += 1
        await self.nodes[node_id].start(self.addresses, self._seed)

    async def close(self) -> None:
        for node in self.nodes.values():
            await node.kill()

    def driver(self, node_id: int) -> RaftDriver:
        driver = self.nodes[node_id].driver
        assert driver is not None
        return driver

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items()
                if n.driver is not None and not n.driver.stopped and n.driver.is_leader]

    async def leader(self, timeout_s: float = 10.0, other_than: int | None = None) -> int:
        def one() -> int | None:
            found = [i for i in self.leaders() if i != other_than]
            return found[0] if len(found) == 1 else None
        return await eventually(one, timeout_s, "one leader")  # type: ignore[return-value]

    async def propose(self, values: Sequence[bytes], timeout_s: float = 10.0) -> int:
        """Propose on the leader (whoever it is when asked) until committed; the offset."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader = await self.leader(timeout_s)
            offset = self.driver(leader).propose(values)
            if offset is None:
                continue
            with contextlib.suppress(Exception):
                await self.driver(leader).wait_committed(offset, timeout_s)
                return offset
        raise AssertionError(f"{values!r} not committed within {timeout_s} s")

    async def all_applied(self, values: Sequence[bytes], nodes: Sequence[int] | None = None,
                          timeout_s: float = 10.0) -> None:
        ids = list(nodes or self.nodes)
        await eventually(lambda: all(self.nodes[i].app.values == list(values) for i in ids),
                         timeout_s, f"nodes {ids} to apply {len(values)} records")
