"""Quorum controllers on real raft drivers: a lone voter (no network) or the voters of a
`quorum_harness.Quorum` on loopback, each node with its controller and metadata loader; kio
requests of the controller's APIs built from plain values; a clock moved by hand."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from spark_log.controller.controller_config import ControllerTimings
from spark_log.controller.controller_settings import ControllerSettings
from spark_log.controller.metadata_loader import MetadataLoader
from spark_log.controller.quorum_controller import DEFAULT_TIMINGS, QuorumController
from spark_log.controller.raft_driver import RaftDriver
from spark_log.raft.config import QuorumConfig

from .control_fixtures import request
from .quorum_harness import CLUSTER_ID, Quorum
from .support import eventually

ALONE = QuorumConfig(frozenset({1}), election_timeout_ms=50)
MV = 14


class FakeClock:
    """Milliseconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def settings(voters: frozenset[int] = frozenset({1}), **values: Any) -> ControllerSettings:
    return ControllerSettings(cluster_id=CLUSTER_ID, node_id=min(voters),
                              controller_ids=voters, **values)


class LoneController:
    """A lone voter's driver, controller and loader on `directory`."""

    def __init__(self, directory: Path, clock: Callable[[], int] | None = None,
                 timings: ControllerTimings = DEFAULT_TIMINGS, **setting_values: Any) -> None:
        self.driver = RaftDriver(1, ALONE, directory, cluster_id=CLUSTER_ID,
                                 rng=random.Random(1))
        self.loader = MetadataLoader(self.driver, node_id=1)
        self.controller = QuorumController(
            self.driver, settings(**setting_values), timings=timings,
            clock_ms=clock or FakeClock(), random=random.Random(7))

    async def start(self) -> QuorumController:
        await self.driver.start()
        await eventually(lambda: self.controller.active, 5, "the controller to be active")
        return self.controller

    async def close(self) -> None:
        await self.controller.close()
        await self.driver.close()


class ControllerQuorum:
    """`size` voters, each with a controller and a loader, on loopback."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.quorum = Quorum(root, size)
        self.controllers: dict[int, QuorumController] = {}
        self.loaders: dict[int, MetadataLoader] = {}
        voters = frozenset(self.quorum.nodes)
        for node_id, node in self.quorum.nodes.items():
            node.attach = lambda driver, n=node_id: self._attach(n, driver, voters)

    def _attach(self, node_id: int, driver: RaftDriver, voters: frozenset[int]) -> None:
        self.loaders[node_id] = MetadataLoader(driver, node_id=node_id)
        self.controllers[node_id] = QuorumController(
            driver, settings(voters), random=random.Random(node_id))

    async def start(self) -> None:
        await self.quorum.start()

    async def active(self, other_than: int | None = None, timeout_s: float = 10) -> int:
        """The node whose controller is active (not `other_than`)."""
        def one() -> int | None:
            found = [i for i, c in self.controllers.items() if c.active and i != other_than]
            return found[0] if len(found) == 1 else None
        return await eventually(one, timeout_s, "one active controller")  # type: ignore

    async def kill(self, node_id: int) -> None:
        await self.controllers[node_id].close()
        await self.quorum.nodes[node_id].kill()

    async def close(self) -> None:
        for controller in self.controllers.values():
            await controller.close()
        await self.quorum.close()


# ---- requests -------------------------------------------------------------------------------

def incarnation(broker_id: int) -> uuid.UUID:
    return uuid.UUID(int=(broker_id << 64) | 1)


def registration(broker_id: int, version: int = 3, cluster_id: str = CLUSTER_ID) -> Any:
    return request(62, version, broker_id=broker_id, cluster_id=cluster_id,
                   incarnation_id=incarnation(broker_id), rack=None,
                   listeners=[{"name": "PLAINTEXT", "host": f"b{broker_id}", "port": 9092,
                               "security_protocol": 0}],
                   features=[{"name": "metadata.version", "min_supported_version": 1,
                              "max_supported_version": MV}])


def heartbeat(broker_id: int, broker_epoch: int, offset: int, version: int = 1,
              **flags: bool) -> Any:
    return request(63, version, broker_id=broker_id, broker_epoch=broker_epoch,
                   current_metadata_offset=offset, want_fence=flags.get("want_fence", False),
                   want_shut_down=flags.get("want_shut_down", False))


def create_topics(*names: str, partitions: int = 1, factor: int = 1,
                  version: int = 7) -> Any:
    return request(19, version, timeout=30_000, validate_only=False, topics=[
        {"name": name, "num_partitions": partitions, "replication_factor": factor,
         "assignments": [], "configs": []} for name in names])


def delete_topics(*names: str, version: int = 6) -> Any:
    if version >= 6:
        return request(20, version, timeout=30_000,
                       topics=[{"name": name, "topic_id": uuid.UUID(int=0)} for name in names])
    return request(20, version, timeout=30_000, topic_names=list(names))


def allocate_producer_ids(broker_id: int, broker_epoch: int) -> Any:
    return request(67, 0, broker_id=broker_id, broker_epoch=broker_epoch)


async def unfenced_broker(controller: QuorumController, broker_id: int) -> int:
    """Register `broker_id` and heartbeat it until unfenced; its broker epoch."""
    registered = await controller.handle(registration(broker_id))
    assert registered.error_code == 0, registered
    epoch = registered.broker_epoch
    beat = await controller.handle(heartbeat(broker_id, epoch, epoch))
    assert beat.error_code == 0 and not beat.is_fenced, beat
    return epoch


Scenario = Callable[[ControllerQuorum, int, QuorumController, int], Awaitable[None]]


def run_in_cluster(root: Path, scenario: Scenario) -> None:
    """Run `scenario(cluster, leader, its controller, broker 1's epoch)` on three voters once
    one controller is active and broker 1 is registered and unfenced there; close them after."""
    async def run() -> None:
        cluster = ControllerQuorum(root)
        await cluster.start()
        try:
            leader = await cluster.active()
            controller = cluster.controllers[leader]
            epoch = await unfenced_broker(controller, 1)
            await scenario(cluster, leader, controller, epoch)
        finally:
            await cluster.close()
    asyncio.run(run())
