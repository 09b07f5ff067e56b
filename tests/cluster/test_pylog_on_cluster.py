"""The pylog source and exactly-once sink on a three-node cluster whose brokers die: the same
pylog -> pylog query as the single-broker fault tests (`exactly_once_harness`), over topics with
replication factor 3, while two brokers are SIGKILLed and restarted during the run, writes each
input row exactly once and commits the group's offsets to the end of the input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.replication_support import leader_of
from tests.cluster_process import ClusterProcess
from tests.datasource.test_exactly_once_faults import (
    RUN_LIMIT_S,
    Pipeline,
    assert_exactly_once,
    await_condition,
    committed_offsets,
    first_batch,
    input_ends,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

RECORDS = 40_000
PER_TRIGGER = 2_000  # 20 micro-batches: kills land mid-run


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    running = ClusterProcess(tmp_path / "cluster", config={
        "default.replication.factor": "3", "min.insync.replicas": "2",
        "offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
    }).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.timeout(900)
def test_exactly_once_sink_survives_two_broker_kills(cluster: ClusterProcess,
                                                     tmp_path: Path) -> None:
    pipeline = Pipeline(cluster, tmp_path, RECORDS)  # type: ignore[arg-type]
    child = pipeline.start(True, PER_TRIGGER, first_batch)
    killed = []
    for after_batches, partition in ((3, 0), (8, 1)):
        await_condition(lambda n=after_batches: child.batches() >= n or child.exited(),
                        RUN_LIMIT_S, f"{after_batches} micro-batches")
        assert not child.exited(), f"the query ended before kill {len(killed) + 1}"
        victim = leader_of(cluster.bootstrap, pipeline.output, partition)
        assert victim > 0
        cluster.nodes[victim - 1].kill()
        cluster.nodes[victim - 1].start()
        killed.append(victim)
    code = child.wait(RUN_LIMIT_S)
    assert code == 0 and child.done(), \
        f"the query did not finish ({code}, {child.failure()}):\n{pipeline.log_tail()}"
    assert_exactly_once(pipeline.rows("read_committed"), pipeline)
    assert len(killed) == 2
    assert committed_offsets(cluster, pipeline.group,  # type: ignore[arg-type]
                             pipeline.input) == input_ends(pipeline)

