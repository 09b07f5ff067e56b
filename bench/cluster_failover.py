"""The cluster losing its controller and moving leaderships, with real nodes on loopback ports.

* failover: SIGKILL of the active controller, then the time until the quorum names a new leader
  and until a new metadata change (a CreateTopics through a surviving node) is committed —
  against the same CreateTopics on a healthy cluster, and against the quorum's own bound
  (`controller.quorum.fetch.timeout.ms` + `controller.quorum.election.timeout.ms`, the longest a
  follower waits before it stands);
* controlled shutdown: SIGTERM of a broker leading a third of `--partitions` partitions
  (replication factor 3), the time until no partition names it leader any more (against the
  same healthy CreateTopics) and until the process exits — and, for reference, the exit of the
  same broker restarted, leading nothing.

Usage: python bench/cluster_failover.py [--partitions 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_support import quorum_leader
from tests.cluster_process import ClusterProcess

TOPIC_PARTITIONS = 100
FETCH_TIMEOUT_MS, ELECTION_TIMEOUT_MS = 2000, 1000  # Kafka's defaults
GIVE_UP_S = 60.0


def bench_cluster(root: Path) -> ClusterProcess:
    """Three nodes with Kafka's default quorum timeouts; leaderships stay where failovers put
    them (no automatic rebalance moving them back between rounds)."""
    return ClusterProcess(root, config={
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "auto.leader.rebalance.enable": "false"})


def controller(cluster: ClusterProcess, node_id: int) -> str:
    return f"127.0.0.1:{cluster.controller_ports[node_id - 1]}"


def active_controller(cluster: ClusterProcess, among: list[int]) -> int:
    for node_id in among:
        try:
            leader, _ = quorum_leader(controller(cluster, node_id))
        except OSError:
            continue
        if leader in among:
            return leader
    return -1


def create(bootstrap: str, name: str, partitions: int = 1, replication: int = 1,
           timeout_s: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)],
                        request_timeout=timeout_s)[name].result(timeout_s)


def leaders(bootstrap: str, topics: list[str]) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return [p.leader for t in topics for p in metadata.topics[t].partitions.values()]


def until(condition, what: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds until `condition()` holds (polled), or an error after GIVE_UP_S."""
    start = time.monotonic()
    while time.monotonic() - start < GIVE_UP_S:
        try:
            if condition():
                return time.monotonic() - start
        except Exception:  # a node just killed, a request refused: try again
            pass
        time.sleep(0.01)
    raise TimeoutError(f"{what} not within {GIVE_UP_S} s")


def steady_create_s(cluster: ClusterProcess, rounds: int) -> float:
    times = []
    for i in range(rounds):
        start = time.monotonic()
        create(cluster.bootstrap, f"steady-{i}")
        times.append(time.monotonic() - start)
    return statistics.median(times)


def failover(cluster: ClusterProcess, round_: int) -> tuple[float, float]:
    """(seconds to a new quorum leader, seconds to a committed change) after SIGKILL of the
    active controller; the killed node is restarted and back before this returns."""
    everyone = list(range(1, cluster.size + 1))
    old = active_controller(cluster, everyone)
    survivors = [n for n in everyone if n != old]
    bootstrap = ",".join(cluster.nodes[n - 1].bootstrap for n in survivors)
    cluster.nodes[old - 1].kill()
    killed = time.monotonic()
    elected = until(lambda: active_controller(cluster, survivors) > 0, "a new controller")
    until(lambda: create(bootstrap, f"after-kill-{round_}", timeout_s=2.0) is None,
          "a committed change")
    committed = time.monotonic() - killed
    cluster.nodes[old - 1].start()
    return elected, committed


def controlled_shutdown(cluster: ClusterProcess, topics: list[str]) -> tuple[int, float, float]:
    """(leaderships moved, seconds until moved, seconds until the process exited) for the
    broker leading the most partitions, the active controller excepted."""
    everyone = list(range(1, cluster.size + 1))
    active = active_controller(cluster, everyone)
    led = leaders(cluster.bootstrap, topics)
    victim = max((n for n in everyone if n != active), key=led.count)
    observer = cluster.nodes[active - 1].bootstrap
    node = cluster.nodes[victim - 1]
    assert node.proc is not None
    node.terminate()
    start = time.monotonic()
    moved = until(lambda: victim not in leaders(observer, topics), "leaderships moved")
    node.proc.wait(GIVE_UP_S)
    return led.count(victim), moved, time.monotonic() - start


def idle_stop_s(cluster: ClusterProcess, topics: list[str]) -> float:
    """Restart the broker stopped last (it leads nothing now) and time its clean stop."""
    everyone = list(range(1, cluster.size + 1))
    stopped = next(n for n in everyone
                   if cluster.nodes[n - 1].proc is None or cluster.nodes[n - 1].proc.poll()
                   is not None)
    node = cluster.nodes[stopped - 1]
    node.start()
    assert stopped not in leaders(node.bootstrap, topics)
    assert node.proc is not None
    start = time.monotonic()
    node.terminate()
    node.proc.wait(GIVE_UP_S)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as root:
        cluster = bench_cluster(Path(root))
        cluster.start()
        try:
            topics = [f"bench-{t}" for t in range(args.partitions // TOPIC_PARTITIONS)]
            for topic in topics:
                create(cluster.bootstrap, topic, TOPIC_PARTITIONS, 3, timeout_s=60)
            baseline = steady_create_s(cluster, 5)
            bound = (FETCH_TIMEOUT_MS + ELECTION_TIMEOUT_MS) / 1000
            print(f"3 nodes, {len(topics) * TOPIC_PARTITIONS} partitions (RF 3); CreateTopics "
                  f"on a healthy cluster: {baseline * 1000:.0f} ms (median of 5); quorum bound "
                  f"fetch+election timeout {bound:.1f} s")
            # The controlled shutdown first, while every ISR is whole: data is not replicated
            # yet, so a broker that was fenced does not rejoin ISRs, and after the failovers
            # some partitions would have no other ISR member to move to.
            count, moved, exited = controlled_shutdown(cluster, topics)
            offline = leaders(cluster.bootstrap, topics).count(-1)
            idle = idle_stop_s(cluster, topics)
            print(f"controlled shutdown of a broker leading {count} partitions: all moved "
                  f"({offline} left without a leader) after {moved:.2f} s ({moved / baseline:.0f}x "
                  f"a healthy create), process exited after {exited:.2f} s; the same broker "
                  f"leading nothing exits {idle:.2f} s after SIGTERM")
            cluster.nodes[next(n for n in range(cluster.size)
                               if cluster.nodes[n].proc.poll() is not None)].start()
            for r in range(args.rounds):
                elected, committed = failover(cluster, r)
                print(f"SIGKILL of the controller, round {r + 1}: new leader after "
                      f"{elected:.2f} s ({elected / bound:.2f} of the bound), committed change "
                      f"after {committed:.2f} s ({committed / baseline:.0f}x a healthy create)")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
