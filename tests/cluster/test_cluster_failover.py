"""A three-node cluster losing nodes: the active controller SIGKILLed is replaced within the
quorum's timeouts and no committed metadata is lost, and it rejoins as a follower; a broker
SIGKILLed is fenced after `broker.session.timeout.ms` and its leaderships move; a broker
stopped cleanly moves its leaderships away before it stops (controlled shutdown).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster_support import create_topic, leaders_of, quorum_leader, wait_for
from tests.cluster_process import ClusterProcess

FETCH_TIMEOUT_MS = 2000  # controller.quorum.fetch.timeout.ms: when followers give up a leader
ELECTION_TIMEOUT_MS = 1000  # controller.quorum.election.timeout.ms
SESSION_TIMEOUT_MS = 3000  # broker.session.timeout.ms in ClusterProcess


@pytest.fixture
def cluster(tmp_path) -> Iterator[ClusterProcess]:  # type: ignore[no-untyped-def]
    running = ClusterProcess(tmp_path, config={
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS)}).start()
    try:
        yield running
    finally:
        running.stop()


def controller_address(cluster: ClusterProcess, node_id: int) -> str:
    return f"127.0.0.1:{cluster.controller_ports[node_id - 1]}"


def active_controller(cluster: ClusterProcess, skip: int = -1) -> int:
    for node_id in range(1, cluster.size + 1):
        if node_id == skip:
            continue
        leader, _ = quorum_leader(controller_address(cluster, node_id))
        if leader > 0 and leader != skip:
            return leader
    return -1


def create(bootstrap: str, name: str, partitions: int = 3) -> None:
    create_topic(bootstrap, name, partitions)


def test_killed_controller_is_replaced_and_rejoins(cluster: ClusterProcess) -> None:
    create(cluster.bootstrap, "before")
    old = active_controller(cluster)
    assert old in (1, 2, 3)
    _, old_epoch = quorum_leader(controller_address(cluster, old))
    cluster.nodes[old - 1].kill()
    killed_at = time.monotonic()
    survivors = [n for n in cluster.nodes if n is not cluster.nodes[old - 1]]
    bound_s = (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 3.0
    assert wait_for(lambda: active_controller(cluster, skip=old) > 0, bound_s), cluster.logs()
    new = active_controller(cluster, skip=old)
    elected_s = time.monotonic() - killed_at
    assert new != old and elected_s < bound_s
    bootstrap = ",".join(n.bootstrap for n in survivors)
    create(bootstrap, "after")  # a new committed change through the new controller
    for node in survivors:
        assert len(leaders_of(node.bootstrap, "before")) == 3
    cluster.nodes[old - 1].start()
    leader, epoch = quorum_leader(controller_address(cluster, old))
    assert leader == new and epoch > old_epoch
    assert wait_for(lambda: len(leaders_of(cluster.nodes[old - 1].bootstrap, "after")) == 3, 30)


def test_killed_broker_is_fenced_and_loses_its_leaderships(cluster: ClusterProcess) -> None:
    create(cluster.bootstrap, "fenced", partitions=6)
    controller = active_controller(cluster)
    victim = next(n for n in (1, 2, 3) if n != controller)
    assert victim in leaders_of(cluster.bootstrap, "fenced").values()
    cluster.nodes[victim - 1].kill()
    others = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes) if i != victim - 1)
    assert wait_for(lambda: victim not in leaders_of(others, "fenced").values(),
                    SESSION_TIMEOUT_MS / 1000 + 10), cluster.logs()
    assert all(leader in (1, 2, 3) and leader != victim
               for leader in leaders_of(others, "fenced").values())
    admin = AdminClient({"bootstrap.servers": others})
    assert sorted(admin.list_topics(timeout=10).brokers) == sorted(
        n for n in (1, 2, 3) if n != victim)


def test_clean_stop_moves_leaderships_first(cluster: ClusterProcess) -> None:
    create(cluster.bootstrap, "handover", partitions=6)
    controller = active_controller(cluster)
    leaving = next(n for n in (1, 2, 3) if n != controller)
    assert leaving in leaders_of(cluster.bootstrap, "handover").values()
    started = time.monotonic()
    assert cluster.nodes[leaving - 1].stop() == 0
    # Moved by the controlled shutdown, not by fencing: well before the session expires.
    assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000
    others = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes) if i != leaving - 1)
    assert wait_for(lambda: leaving not in leaders_of(others, "handover").values(), 2)
