"""The quorum's and the controller's Prometheus metrics on three real nodes (`--metrics-port`):
every node names the same leader and epoch, exactly one reports itself the active controller
and counts the cluster's brokers, topics and partitions; after SIGKILL of that node another
takes over, counts the dead broker as fenced once its session expires, and every survivor has
timed the election."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_support import create_topic, leaders_of, wait_for
from tests.cluster_process import ClusterProcess
from tests.prometheus_samples import Samples, scrape_port, value, value_or_none

SESSION_TIMEOUT_S = 3.0  # broker.session.timeout.ms in ClusterProcess


@pytest.fixture
def cluster(tmp_path) -> Iterator[ClusterProcess]:  # type: ignore[no-untyped-def]
    running = ClusterProcess(tmp_path, metrics=True).start()
    try:
        yield running
    finally:
        running.stop()


def scrape(cluster: ClusterProcess, node_id: int) -> Samples:
    port = cluster.metrics_ports[node_id - 1]
    assert port is not None
    return scrape_port(port)


def state_of(samples: Samples) -> str:
    (state,) = [dict(labels)["state"] for (name, labels), v in samples.items()
                if name == "spark_log_raft_current_state" and v == 1]
    return state


def active_of(cluster: ClusterProcess, nodes: list[int]) -> list[int]:
    return [n for n in nodes if value(scrape(cluster, n), "spark_log_controller_active") == 1]


def test_every_node_reports_the_quorum_and_one_the_cluster(cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "metered", partitions=6)
    nodes = [1, 2, 3]
    (active,) = active_of(cluster, nodes)
    scraped = {n: scrape(cluster, n) for n in nodes}
    for n, samples in scraped.items():
        assert value(samples, "spark_log_raft_current_leader") == active
        assert state_of(samples) == ("leader" if n == active else "follower")
        assert value(samples, "spark_log_raft_log_end_offset") >= \
            value(samples, "spark_log_raft_high_watermark") > 0
        assert value(samples, "spark_log_metadata_load_errors") == 0
        assert value(samples, "spark_log_raft_election_seconds_count") >= 1
    epochs = {value(s, "spark_log_raft_current_epoch") for s in scraped.values()}
    assert len(epochs) == 1
    counts = scraped[active]
    assert value(counts, "spark_log_controller_active_brokers") == 3
    assert value(counts, "spark_log_controller_fenced_brokers") == 0
    assert value(counts, "spark_log_controller_global_topics") >= 1
    assert value(counts, "spark_log_controller_global_partitions") >= 6
    assert value(counts, "spark_log_controller_offline_partitions") == 0
    assert value(counts, "spark_log_controller_last_committed_record_offset") == \
        value(counts, "spark_log_raft_high_watermark") - 1
    # Cluster-wide counts come from the active controller alone.
    assert all(("spark_log_controller_global_topics", frozenset()) not in scraped[n]
               for n in nodes if n != active)
    # Every node applies what is committed.
    for n in nodes:
        assert wait_for(lambda n=n: value(scrape(cluster, n),
                                          "spark_log_metadata_last_applied_record_offset")
                        >= value(counts, "spark_log_controller_last_committed_record_offset"),
                        10)


def test_a_killed_controller_is_replaced_and_its_broker_counted_fenced(
        cluster: ClusterProcess) -> None:
    create_topic(cluster.bootstrap, "metered", partitions=3)
    (old,) = active_of(cluster, [1, 2, 3])
    survivors = [n for n in (1, 2, 3) if n != old]
    cluster.nodes[old - 1].kill()
    assert wait_for(lambda: len(active_of(cluster, survivors)) == 1, 15), cluster.logs()
    (new,) = active_of(cluster, survivors)
    assert wait_for(lambda: value(scrape(cluster, new), "spark_log_controller_fenced_brokers")
                    == 1, SESSION_TIMEOUT_S + 10), cluster.logs()
    counts = scrape(cluster, new)
    assert value(counts, "spark_log_controller_active_brokers") == 2
    others = ",".join(cluster.nodes[n - 1].bootstrap for n in survivors)
    assert old not in leaders_of(others, "metered").values()
    assert value(counts, "spark_log_controller_offline_partitions") == 0
    for n in survivors:  # one election timed before start-up, one after the kill
        assert value(scrape(cluster, n), "spark_log_raft_election_seconds_count") >= 2


def test_a_dead_follower_makes_its_leaders_partitions_under_replicated(
        cluster: ClusterProcess) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("watched", 1, replica_assignment=[[1, 2, 3]], config={
        "min.insync.replicas": "3"})])["watched"].result(30)

    def gauges(node: int) -> tuple[float | None, float | None]:
        samples = scrape(cluster, node)
        # (None until the node has applied the new topic: CreateTopics answers once the
        # controller committed it, which may be before node 1's metadata image has it.)
        return (value_or_none(samples, "spark_log_under_replicated_partitions", topic="watched"),
                value_or_none(samples, "spark_log_under_min_isr_partitions", topic="watched"))

    assert wait_for(lambda: gauges(1) == (0, 0), 15), gauges(1)
    cluster.nodes[2].kill()  # node 3, a follower: fenced, then out of the ISR
    assert wait_for(lambda: gauges(1) == (1, 1), SESSION_TIMEOUT_S + 15), gauges(1)
    assert gauges(2) == (0, 0)  # a follower reports only what it leads
    cluster.nodes[2].start()
    assert wait_for(lambda: gauges(1) == (0, 0), 30), gauges(1)
