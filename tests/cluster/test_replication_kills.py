"""The replication issue's acceptance run, on three real nodes: an idempotent confluent-kafka
producer with acks=all writes continuously to a topic with replication factor 3 and
min.insync.replicas=2 while the leader of one of its partitions — or, separately, a follower, or
the leader with flush.messages=1 — is SIGKILLed and restarted again and again; a consumer tails
the topic throughout. The history checker then finds every acknowledged record present exactly
once and in order, and no record a consumer saw missing later.

The suite kills `SPARK_LOG_KILLS` times (default 3 each); the full acceptance run is
`SPARK_LOG_KILLS=50 .venv/bin/python -m pytest tests/cluster/test_replication_kills.py`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli.conftest import run_cli
from tests.cluster.history import History, acked_and_read, continuous_run, final_read
from tests.cluster.replication_support import leader_of
from tests.cluster_process import ClusterProcess

KILLS = int(os.environ.get("SPARK_LOG_KILLS", "3"))
PARTITIONS = 3
PROGRESS = 100  # records acknowledged and read after each restart before the next kill
WAIT_S = 60.0


@pytest.fixture
def cluster(tmp_path, request) -> Iterator[ClusterProcess]:  # type: ignore[no-untyped-def]
    # With flush.messages=1, the recovery points on disk follow the appends closely.
    flushing = request.node.callspec.params.get("flush_messages") is not None
    config = {"log.flush.offset.checkpoint.interval.ms": "200"} if flushing else None
    running = ClusterProcess(tmp_path, config=config).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.timeout(180 + 30 * KILLS)  # about 5-10 s a round on 2 cores
@pytest.mark.parametrize(("victim", "flush_messages"),
                         [("leader", None), ("follower", None), ("leader", "1")])
def test_acknowledged_records_survive_repeated_sigkills(cluster: ClusterProcess, victim: str,
                                                        flush_messages: str | None) -> None:
    # With flush.messages=1 the recovery point follows every append, so a restarted node
    # re-reads none of its batches: their leader epochs must come from its checkpoint file,
    # written before each flush. After each kill, `dump-log --verify` checks that the killed
    # node's checkpoints name the epoch of every batch below its recovery points.
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"}
    if flush_messages is not None:
        config["flush.messages"] = flush_messages
    admin.create_topics([NewTopic("kills", PARTITIONS, 3, config=config)])["kills"].result(30)
    history = History()
    with continuous_run(bootstrap, "kills", history, PARTITIONS, rate=1000) as (producer,
                                                                               consumer):
        assert acked_and_read(producer, consumer, PROGRESS, WAIT_S)
        for round_ in range(KILLS):
            partition = round_ % PARTITIONS
            leader = leader_of(bootstrap, "kills", partition)
            assert leader > 0, f"round {round_}: {partition} has no leader"
            target = leader if victim == "leader" else \
                next(n for n in (1, 2, 3) if n != leader)
            cluster.nodes[target - 1].kill()
            if flush_messages is not None:
                _assert_epochs_on_disk(cluster.nodes[target - 1].data_dir)
            cluster.nodes[target - 1].start()
            assert acked_and_read(producer, consumer, producer.next_value + PROGRESS, WAIT_S), \
                f"round {round_}: no progress after node {target} restarted\n" \
                f"{cluster.logs()[-6000:]}"
    assert producer.fatal == [], producer.fatal
    final_read(history, bootstrap, "kills")
    report = history.check()
    assert report.ok, str(report)
    assert report.counts["acked"] >= PROGRESS * (KILLS + 1)


def _assert_epochs_on_disk(data_dir: Path) -> None:
    done = run_cli("dump-log", "--verify", "--data-dir", str(data_dir))
    assert done.returncode == 0 and " no problems, " in done.stdout, done.stdout
