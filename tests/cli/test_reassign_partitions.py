"""`spark-log reassign-partitions` and `spark-log leader-election` against a real three-node
cluster (every node a broker and a voter), as a user runs them.

A move onto a new broker completes only once that replica has caught up and joined the ISR: a
move of a few MB throttled to 100 kB/s is listed and verified as in progress with its throttles
set, and cancelling reverts it and clears the throttles; an unthrottled move completes, drops
the old replica and --verify clears the throttles; a move within the ISR (a new order)
completes at once, a preferred election then hands the leadership to the new first replica; and
bad input is one clear error with a non-zero exit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.cli.conftest import run_cli
from tests.cluster.cluster_support import describe_topic, wait_for
from tests.cluster_process import ClusterProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    running = ClusterProcess(tmp_path_factory.mktemp("reassign")).start()
    try:
        yield running
    finally:
        running.stop()


def cli(cluster: ClusterProcess, *args: str) -> Any:
    return run_cli(*args, "--bootstrap-server", cluster.nodes[0].bootstrap)


def ok(cluster: ClusterProcess, *args: str) -> str:
    done = cli(cluster, *args)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def refused(cluster: ClusterProcess, *args: str) -> str:
    """The one `error:` line of a command that must fail with exit 1."""
    done = cli(cluster, *args)
    assert done.returncode == 1, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ")
    return line


THROTTLE = 100_000  # B/s
THROTTLED_BYTES = 3 << 20  # at THROTTLE, half a minute of replication


def fill(cluster: ClusterProcess, topic: str, size: int) -> None:
    """`size` bytes of 1 kB records in partition 0, acknowledged by every in-sync replica."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 20})
    for n in range(size // 1024):
        producer.produce(topic, b"%08d" % n + b"x" * 1016, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def create(cluster: ClusterProcess, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[
        name].result(30)


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def moves(tmp_path: Path, name: str, *partitions: tuple[str, int, list[int]]) -> str:
    return write(tmp_path, name, {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for t, p, r in partitions]})


def configs(cluster: ClusterProcess, resource_type: ConfigResource.Type, name: str,
            *keys: str) -> dict[str, str | None]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(resource_type, name)
    described = admin.describe_configs([resource])[resource].result(30)
    return {key: None if described[key].is_default else described[key].value for key in keys}


def test_generate_proposes_the_topics_over_the_broker_list(cluster: ClusterProcess,
                                                           tmp_path: Path) -> None:
    create(cluster, "gen", [[1, 2], [2, 3], [3, 1]])
    topics = write(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": "gen"}]})
    out = ok(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
             "--broker-list", "1,2")
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": "gen", "partition": p, "replicas": r, "log_dirs": ["any", "any"]}
        for p, r in enumerate([[1, 2], [2, 3], [3, 1]])]}
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [p["partition"] for p in proposed] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [1, 2] for p in proposed)
    line = refused(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file",
                   topics, "--broker-list", "1,9")
    assert line == "error: Unknown broker id 9 (the cluster's brokers: 1,2,3)"


def test_a_move_is_listed_in_progress_throttled_and_cancelled(cluster: ClusterProcess,
                                                              tmp_path: Path) -> None:
    create(cluster, "moving", [[1, 2]])
    fill(cluster, "moving", THROTTLED_BYTES)  # far more than the throttle lets through at once
    plan = moves(tmp_path, "plan.json", ("moving", 0, [1, 3]))
    out = ok(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan,
             "--throttle", str(THROTTLE))
    assert out.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}', "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        f"The inter-broker throttle limit was set to {THROTTLE} B/s",
        "Successfully started partition reassignment for moving-0"]
    # Replicas are the target then the removed one; broker 3 catches up before 2 leaves.
    partition = describe_topic(cluster.nodes[2].bootstrap, "moving")[0]
    assert partition.replicas == [1, 3, 2] and partition.leader == 1
    assert ok(cluster, "reassign-partitions", "--list").splitlines() == [
        "Current partition reassignments:",
        "moving-0: replicas: 1,3,2. adding: 3. removing: 2."]
    assert configs(cluster, ConfigResource.Type.TOPIC, "moving",
                   "leader.replication.throttled.replicas",
                   "follower.replication.throttled.replicas") == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3"}
    for broker in ("1", "2", "3"):
        assert configs(cluster, ConfigResource.Type.BROKER, broker,
                       "leader.replication.throttled.rate") == {
            "leader.replication.throttled.rate": str(THROTTLE)}

    verify = ok(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan)
    assert verify.splitlines() == ["Status of partition reassignment:",
                                   "Reassignment of partition moving-0 is still in progress."]
    again = refused(cluster, "reassign-partitions", "--execute", "--reassignment-json-file",
                    plan)
    assert again.startswith("error: Cannot execute because there is an existing partition "
                            "assignment.")

    cancel = ok(cluster, "reassign-partitions", "--cancel", "--reassignment-json-file", plan)
    assert cancel.splitlines() == [
        "Successfully cancelled partition reassignment for: moving-0",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic moving"]
    assert sorted(describe_topic(cluster.nodes[1].bootstrap, "moving")[0].replicas) == [1, 2]
    assert ok(cluster, "reassign-partitions", "--list") == "No partition reassignments found.\n"
    assert configs(cluster, ConfigResource.Type.TOPIC, "moving",
                   "leader.replication.throttled.replicas") == {
        "leader.replication.throttled.replicas": None}
    assert configs(cluster, ConfigResource.Type.BROKER, "3",
                   "follower.replication.throttled.rate") == {
        "follower.replication.throttled.rate": None}
    assert ok(cluster, "reassign-partitions", "--cancel", "--reassignment-json-file", plan,
              "--preserve-throttles") == \
        "None of the specified partition reassignments are active.\n"


def test_an_unthrottled_move_completes_and_verify_clears_its_throttles(
        cluster: ClusterProcess, tmp_path: Path) -> None:
    create(cluster, "grown", [[1, 2]])
    fill(cluster, "grown", 256 << 10)
    plan = moves(tmp_path, "grow.json", ("grown", 0, [3, 1]))
    ok(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan,
       "--throttle", "1000000000")

    def completed() -> bool:
        return describe_topic(cluster.nodes[0].bootstrap, "grown")[0].replicas == [3, 1]

    assert wait_for(completed, 60), describe_topic(cluster.nodes[0].bootstrap, "grown")
    assert sorted(describe_topic(cluster.nodes[0].bootstrap, "grown")[0].isrs) == [1, 3]
    verify = ok(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan)
    assert "Reassignment of partition grown-0 is completed." in verify.splitlines()
    assert configs(cluster, ConfigResource.Type.TOPIC, "grown",
                   "follower.replication.throttled.replicas") == {
        "follower.replication.throttled.replicas": None}
    assert wait_for(lambda: not (Path(cluster.nodes[1].data_dir) / "grown-0").exists(), 30)


def test_a_new_order_completes_at_once_and_a_preferred_election_follows_it(
        cluster: ClusterProcess, tmp_path: Path) -> None:
    create(cluster, "reorder", [[1, 2, 3], [2, 3, 1]])
    plan = moves(tmp_path, "reorder.json", ("reorder", 0, [2, 1, 3]))
    ok(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan)
    partition = describe_topic(cluster.nodes[0].bootstrap, "reorder")[0]
    assert partition.replicas == [2, 1, 3] and partition.leader == 1  # 1 still in sync
    assert ok(cluster, "reassign-partitions", "--verify", "--reassignment-json-file",
              plan).splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition reorder-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic reorder"]

    elected = ok(cluster, "leader-election", "--election-type", "PREFERRED", "--topic",
                 "reorder", "--partition", "0")
    assert elected == "Successfully completed leader election (PREFERRED) for partitions " \
                      "reorder-0\n"
    assert wait_for(lambda: all(describe_topic(n.bootstrap, "reorder")[0].leader == 2
                                for n in cluster.nodes), 10)
    elections = write(tmp_path, "elect.json", {"partitions": [
        {"topic": "reorder", "partition": 0}, {"topic": "reorder", "partition": 1}]})
    again = ok(cluster, "leader-election", "--election-type", "preferred",
               "--path-to-json-file", elections)
    assert again == "Valid replica already elected for partitions reorder-0, reorder-1\n"
    # Every partition has a leader: an unclean election has nothing to do anywhere.
    assert ok(cluster, "leader-election", "--election-type", "UNCLEAN",
              "--all-topic-partitions") == ""


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "not valid JSON"),
    ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
    ({"version": 2, "partitions": []}, "Not supported version field value 2"),
    ({"partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]},
     "error: Topic nope not found."),
    ({"partitions": [{"topic": "gen", "partition": 7, "replicas": [1]}]},
     "error: Unable to find partition: gen-7"),
    ({"partitions": [{"topic": "gen", "partition": 0, "replicas": [1, 9]}]},
     "error: Unknown broker id 9 (the cluster's brokers: 1,2,3)"),
    ({"partitions": [{"topic": "gen", "partition": 0, "replicas": [1, 1]}]},
     "gen-0 contains multiple entries for 1"),
])
def test_bad_reassignment_files_are_one_clear_error(cluster: ClusterProcess, tmp_path: Path,
                                                    document: Any, message: str) -> None:
    if "gen" in json.dumps(document) and "gen" not in describe_all(cluster):
        create(cluster, "gen", [[1, 2], [2, 3], [3, 1]])
    plan = write(tmp_path, "bad.json", document)
    assert message in refused(cluster, "reassign-partitions", "--execute",
                              "--reassignment-json-file", plan)


def describe_all(cluster: ClusterProcess) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def test_leader_election_refuses_unknown_topics_and_bad_flags(cluster: ClusterProcess) -> None:
    line = refused(cluster, "leader-election", "--election-type", "PREFERRED", "--topic", "nope",
                   "--partition", "0")
    assert "topic 'nope' does not exist" in line
    usage = cli(cluster, "leader-election", "--election-type", "PREFERRED", "--topic", "gen")
    assert usage.returncode == 2 and usage.stderr == "error: --topic needs --partition\n"
    usage = cli(cluster, "leader-election", "--election-type", "SOMETIMES",
                "--all-topic-partitions")
    assert usage.returncode == 2 and "expected PREFERRED or UNCLEAN" in usage.stderr
    usage = cli(cluster, "reassign-partitions", "--verify")
    assert usage.returncode == 2 and \
        usage.stderr == "error: --verify needs --reassignment-json-file\n"
