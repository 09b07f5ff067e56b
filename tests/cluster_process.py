"""A cluster of real nodes as child processes on loopback ports, for tests: each node has both
roles (combined mode) and is a voter of the controller quorum, as the README's three-node
instructions start them. Directories are formatted with `spark-log storage format` first, as a
new user would. Only these children are ever signalled.

The voters' ports must be known before any node starts, so they are picked free beforehand;
clients' ports too, so that a restarted node keeps the address clients remember.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from pathlib import Path

from tests.broker_process import BrokerProcess

FORMAT_TIMEOUT_S = 60.0


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_FLOOR = 10_000  # the lowest port picked
PICK_ATTEMPTS = 10_000


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default where unreadable)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now, picked at random below the kernel's ephemeral range.

    A port the kernel hands out for port 0 is an ephemeral one: between picking it and a node
    binding it, any process's outgoing connection may take it (a cluster of one test failed to
    start so, with another test running beside it). Below the range only a listener can take
    it, and other pickers choose at random among some 20,000.
    """
    low = _ephemeral_low()
    if low - PORT_FLOOR < 100 * count:  # an unusual range: the kernel's choice, as before
        return _kernel_ports(count)
    pick = random.SystemRandom()
    held: list[socket.socket] = []
    try:
        for _ in range(PICK_ATTEMPTS):
            if len(held) == count:
                break
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", pick.randrange(PORT_FLOOR, low)))
            except OSError:  # in use (or just picked): another
                sock.close()
                continue
            held.append(sock)
        if len(held) < count:
            raise RuntimeError(f"no {count} free ports below {low} in {PICK_ATTEMPTS} tries")
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _kernel_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class ClusterProcess:
    """Nodes 1..n; `nodes[i]` is node i + 1."""

    def __init__(self, root: Path, size: int = 3, config: dict[str, str] | None = None,
                 cluster_id: str = "MkU3OEVBNTcwNTJENDM2Qg", metrics: bool = False) -> None:
        self.root, self.size, self.cluster_id = root, size, cluster_id
        ports = free_ports(3 * size)
        self.client_ports, self.controller_ports = ports[:size], ports[size:2 * size]
        self.metrics_ports: list[int | None] = list(ports[2 * size:]) if metrics else [None] * size
        self.voters = ",".join(f"{n + 1}@127.0.0.1:{p}"
                               for n, p in enumerate(self.controller_ports))
        self.nodes = [BrokerProcess(root / f"node{n + 1}", root / f"node{n + 1}.log",
                                    {**self.node_config(n + 1), **(config or {})},
                                    port=self.client_ports[n], metrics_port=self.metrics_ports[n])
                      for n in range(size)]

    def node_config(self, node_id: int) -> dict[str, str]:
        return {
            "process.roles": "broker,controller", "node.id": str(node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.client_ports[node_id - 1]},"
                         f"CONTROLLER://127.0.0.1:{self.controller_ports[node_id - 1]}",
            "controller.listener.names": "CONTROLLER",
            "broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000",
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def format(self) -> None:
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, "-m", "spark_log.cli.main", "storage", "format",
                    "--cluster-id", self.cluster_id, "--data-dir", str(node.data_dir)]
            for key, value in node.config.items():
                argv += ["--config", f"{key}={value}"]
            subprocess.run(argv, check=True, capture_output=True, timeout=FORMAT_TIMEOUT_S)

    def start(self) -> ClusterProcess:
        """Format and start every node; each is ready once its broker is unfenced. The nodes
        start together: a quorum forms only once a majority runs."""
        self.format()
        for node in self.nodes:
            node.launch()
        for node in self.nodes:
            node.await_ready()
        return self

    def stop(self) -> None:
        """SIGTERM to every node at once (each moves its leaderships away while a quorum
        remains), then wait for each; SIGKILL whatever has not stopped."""
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            try:
                node.stop()
            finally:
                node.kill()

    def logs(self) -> str:
        return "\n".join(f"---- node {n + 1}\n{node.log()}" for n, node in enumerate(self.nodes))
