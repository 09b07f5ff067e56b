"""Metadata snapshots under SIGKILL: a three-node cluster that writes a snapshot after every
committed batch (`metadata.log.max.record.bytes.between.snapshots=1`), of an image large enough
to take a while to encode, has a node chosen by a seed SIGKILLed right after topics are created
(its writer thread is encoding, or the file is being written, or the log's prefix dropped),
creates more topics while it is down, and restarts it from its files.

Every node must restart from what it has on disk, whatever moment the kill hit: its metadata
log never starts past its newest complete snapshot, and it ends with the same topics,
partitions, leaders, replicas and ISRs as the others. A snapshot that holds less than its id
claims (encoding the image published one batch earlier, say) fails the restart. And in each round
only the killed node is fenced: restarts and elections here once cost live brokers their
sessions (a restarted voter unseated the leader; heartbeats queued behind ISR changes).
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.controller.snapshot_files import list_snapshots
from tests.broker_process import BrokerProcess
from tests.cluster.cluster_support import wait_for
from tests.cluster_process import ClusterProcess

BIG_PARTITIONS = 500  # an image whose snapshot takes tens of ms to encode
ROUNDS = 3
CREATE_DEADLINE_S = 60.0  # a creation spans at most one controller election
RETRY_BACKOFF_S = 0.1
FENCED = re.compile(r"Fencing broker (\d+): its session expired")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    running = ClusterProcess(tmp_path, config={
        "metadata.log.max.record.bytes.between.snapshots": "1",
        "controller.quorum.fetch.timeout.ms": "2000",
        "controller.quorum.election.timeout.ms": "1000"}).start()
    try:
        yield running
    finally:
        running.stop()


def create(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    """Create a topic, asking again while a controller election is under way; a topic found
    to exist already was created by an earlier attempt whose answer was lost."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + CREATE_DEADLINE_S
    while True:
        topic = NewTopic(name, partitions, replication_factor)
        try:
            admin.create_topics([topic], operation_timeout=10, request_timeout=15)[name].result()
            return
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if time.monotonic() > deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)  # as a client backs off before asking again


def metadata_view(node: BrokerProcess) -> dict[str, Any]:
    """Topic -> partition -> (leader, replicas, ISR), as the node's own image answers."""
    topics = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).topics
    return {name: {p: (d.leader, tuple(d.replicas), tuple(sorted(d.isrs)))
                   for p, d in t.partitions.items()}
            for name, t in topics.items() if t.error is None}


def fencings(cluster: ClusterProcess) -> Counter[int]:
    """How often the controllers have fenced each broker for an expired session (the nodes'
    logs only grow: a restarted node appends to its own)."""
    return Counter(int(n) for n in FENCED.findall(cluster.logs()))


def log_start_within_snapshots(node: BrokerProcess) -> tuple[bool, str]:
    """Whether the node's metadata log starts at or before its newest complete snapshot's end
    (at 0 when it has none), and what its files are."""
    directory = node.data_dir / "__cluster_metadata-0"
    snapshots = list_snapshots(directory)
    bases = sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log")
                   if p.name.split(".")[0].isdigit())
    newest = max((s.offset for s in snapshots), default=0)
    files = f"segments at {bases}, snapshots {snapshots}"
    return bool(bases) and bases[0] <= newest, files


@pytest.mark.parametrize("seed", [11])
def test_nodes_killed_while_writing_snapshots_restart_from_their_files_and_agree(
        cluster: ClusterProcess, seed: int) -> None:
    try:
        kill_and_restart(cluster, seed)
    except KafkaException as e:  # a creation the cluster never answered: the nodes' side
        raise AssertionError(f"{e}\n{cluster.logs()[-30000:]}") from e


def kill_and_restart(cluster: ClusterProcess, seed: int) -> None:
    rng = random.Random(seed)
    create(cluster.bootstrap, "big", BIG_PARTITIONS, 3)
    created = ["big"]
    for round_ in range(ROUNDS):
        victim = rng.randrange(cluster.size)
        before = fencings(cluster)
        for i in range(rng.randrange(1, 4)):  # each commit sets off a snapshot on every node
            created.append(f"up-{round_}-{i}")
            create(cluster.bootstrap, created[-1], 3, 3)
        cluster.nodes[victim].kill()
        survivors = ",".join(n.bootstrap for k, n in enumerate(cluster.nodes) if k != victim)
        for i in range(2):  # records, and snapshots past them, that the victim has not got
            created.append(f"down-{round_}-{i}")
            create(survivors, created[-1], 2, 2)
        cluster.nodes[victim].start()
        ok, files = log_start_within_snapshots(cluster.nodes[victim])
        assert ok, f"round {round_}, node {victim + 1}: {files}\n{cluster.logs()}"
        live = set(fencings(cluster) - before) - {victim + 1}
        assert not live, f"round {round_}: live brokers {live} fenced\n{cluster.logs()}"

    views: list[dict[str, Any]] = []

    def agreed() -> bool:
        try:
            views[:] = [metadata_view(node) for node in cluster.nodes]
        except KafkaException:  # a node still settling: asked again
            return False
        return set(created) <= set(views[0]) and views[0] == views[1] == views[2]

    assert wait_for(agreed, 30), f"the nodes disagree: {views}\n{cluster.logs()}"
    assert len(views[0]["big"]) == BIG_PARTITIONS
    for n, node in enumerate(cluster.nodes):
        ok, files = log_start_within_snapshots(node)
        assert ok and "snapshots []" not in files, f"node {n + 1}: {files}"
    assert "creating new KRaft snapshot" in cluster.logs()
