"""Helpers for replication tests on real nodes: a partition's replicas compared byte for byte
on disk, leaders awaited, and acks=all producing with confluent-kafka."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.cluster.cluster_support import describe_topic, wait_for
from tests.cluster_process import ClusterProcess


def replica_bytes(cluster: ClusterProcess, node_id: int, topic: str, partition: int) -> bytes:
    """The partition's segments on node `node_id`, concatenated in offset order."""
    directory = Path(cluster.nodes[node_id - 1].data_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def replicas_identical(cluster: ClusterProcess, topic: str, partition: int,
                       nodes: list[int]) -> bool:
    copies = {replica_bytes(cluster, n, topic, partition) for n in nodes}
    return len(copies) == 1 and b"" not in copies


def await_identical(cluster: ClusterProcess, topic: str, partition: int, nodes: list[int],
                    timeout_s: float = 30.0) -> None:
    if not wait_for(lambda: replicas_identical(cluster, topic, partition, nodes), timeout_s):
        sizes = {n: len(replica_bytes(cluster, n, topic, partition)) for n in nodes}
        raise AssertionError(f"{topic}-{partition}: replicas differ after {timeout_s}s "
                             f"(bytes per node {sizes})\n{cluster.logs()[-8000:]}")


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    try:
        return describe_topic(bootstrap, topic)[partition].leader
    except Exception:
        return -1


def await_leader(bootstrap: str, topic: str, partition: int, not_one_of: set[int],
                 timeout_s: float = 30.0) -> int:
    found: list[int] = []

    def elected() -> bool:
        found[:] = [leader_of(bootstrap, topic, partition)]
        return found[0] >= 0 and found[0] not in not_one_of

    assert wait_for(elected, timeout_s), f"no leader outside {not_one_of} in {timeout_s}s"
    return found[0]


def acks_all_producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 2, "message.timeout.ms": 60000, **extra})


def produce_acked(producer: Producer, topic: str, partition: int, values: list[bytes],
                  timeout_s: float = 60.0) -> list[tuple[bytes, int]]:
    """Produce `values`; (value, offset) of each acknowledged, raising on any failure."""
    acked: list[tuple[bytes, int]] = []
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.value(), msg.offset()))
        else:
            errors.append(err)

    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=done)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    assert remaining == 0 and not errors, f"{remaining} unsent, errors {errors[:3]}"
    return acked
