"""`spark-log metadata-quorum` and `spark-log cluster`.

What they print is checked from DescribeQuorum answers built as kio entities; how the quorum is
asked (version negotiation, a node that does not lead naming the leader, a node that does not
serve DescribeQuorum) against small fake nodes on loopback; and both commands end to end
against a real three-node cluster (every node a broker and a voter).
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Node
from confluent_kafka.admin import DescribeClusterResult

from spark_log.cli.cluster import cluster_rows, cluster_view
from spark_log.cli.main import main
from spark_log.cli.metadata_quorum import failure_message
from spark_log.cli.quorum_view import (
    kafka_uuid,
    quorum_view,
    replication,
    replication_json,
    replication_table,
    status_json,
    status_lines,
)
from spark_log.client.quorum_info import (
    Address,
    QuorumQueryError,
    describe_quorum,
    voter_endpoints,
)
from spark_log.protocol import decode_request_body, encode_response, parse_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build
from tests.cli.conftest import run_cli, table
from tests.cluster_process import ClusterProcess, free_ports
from tests.controller import quorum_harness

NOW_MS = 1_700_000_000_000
DIRECTORY = uuid.UUID("6f9ad8e3-256c-4ed4-9b1d-77c2a3c5b0f1")


def replica(node_id: int, end: int, fetch: int = -1, caught_up: int = -1,
            directory: uuid.UUID | None = None) -> dict[str, Any]:
    return {"replica_id": node_id, "replica_directory_id": directory, "log_end_offset": end,
            "last_fetch_timestamp": fetch, "last_caught_up_timestamp": caught_up}


def quorum_answer(version: int, *, error: int = 0, leader: int = 2,
                  voters: list[Any] | None = None, observers: list[Any] | None = None,
                  nodes: list[Any] | None = None) -> Any:
    """A DescribeQuorum response of `version` for the metadata partition."""
    response_type = spec_for(ApiKey.DESCRIBE_QUORUM).response_type(version)  # type: ignore
    if voters is None:
        voters = [replica(1, 120, NOW_MS - 40, NOW_MS - 900), replica(2, 130, NOW_MS, NOW_MS,
                                                                       DIRECTORY),
                  replica(3, 130, NOW_MS - 10, NOW_MS - 10)]
    partition = {"partition_index": 0, "error_code": error, "error_message": None,
                 "leader_id": leader, "leader_epoch": 7, "high_watermark": 125,
                 "current_voters": voters if not error else [],
                 "observers": (observers or []) if not error else []}
    if nodes is None:
        nodes = [{"node_id": n, "listeners": [{"name": "CONTROLLER", "host": f"10.0.0.{n}",
                                               "port": 9093}]} for n in (1, 2, 3)]
    return build(response_type, {"error_code": 0, "error_message": None, "nodes": nodes,
                                 "topics": [{"topic_name": "__cluster_metadata",
                                             "partitions": [partition]}]})


def view_of(response: Any, version: int) -> Any:
    return quorum_view(response.topics[0].partitions[0], voter_endpoints(response), version)


# ---- output, from built answers -----------------------------------------------------------

def test_status_prints_kafkas_summary() -> None:
    view = view_of(quorum_answer(2, observers=[replica(4, 110, NOW_MS - 5, NOW_MS - 2000)]), 2)
    assert status_lines(view, "MkU3OEVBNTcwNTJENDM2Qg") == [
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qg",
        "LeaderId:               2",
        "LeaderEpoch:            7",
        "HighWatermark:          125",
        "MaxFollowerLag:         10",
        "MaxFollowerLagTimeMs:   900",
        'CurrentVoters:          [{"id": 1, "directoryId": null, "endpoints": '
        '["CONTROLLER://10.0.0.1:9093"]}, {"id": 2, "directoryId": "b5rY4yVsTtSbHXfCo8Ww8Q", '
        '"endpoints": ["CONTROLLER://10.0.0.2:9093"]}, {"id": 3, "directoryId": null, '
        '"endpoints": ["CONTROLLER://10.0.0.3:9093"]}]',
        'CurrentObservers:       [{"id": 4, "directoryId": null}]',
    ]
    document = status_json(view, None)
    assert document["cluster_id"] is None
    assert (document["leader_id"], document["max_follower_lag"]) == (2, 10)
    assert [v["id"] for v in document["current_voters"]] == [1, 2, 3]
    assert document["current_voters"][0]["endpoints"] == ["CONTROLLER://10.0.0.1:9093"]
    assert status_lines(view, None)[0] == "ClusterId:              unknown"


def test_max_follower_lag_time_zero_for_the_leader_and_unknown_without_times() -> None:
    even = view_of(quorum_answer(1, voters=[replica(2, 50, NOW_MS, NOW_MS),
                                            replica(1, 50, NOW_MS - 3, NOW_MS - 3)]), 1)
    assert even.max_follower_lag() == (0, 0)
    never_caught_up = view_of(quorum_answer(1, voters=[replica(1, -1), replica(2, 50, NOW_MS,
                                                                               NOW_MS)]), 1)
    assert never_caught_up.max_follower_lag() == (51, -1)  # Kafka's arithmetic on -1
    no_times = view_of(quorum_answer(0, voters=[replica(1, 40), replica(2, 50)]), 0)
    assert no_times.max_follower_lag() == (10, -1)


def test_replication_lists_the_leader_then_followers_then_observers() -> None:
    view = view_of(quorum_answer(2, observers=[replica(4, 110, NOW_MS - 5, NOW_MS - 2000)]), 2)
    headers, rows = replication_table(view, human_readable=False, now_ms=NOW_MS)
    assert headers == ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status")
    assert rows == [
        [2, "b5rY4yVsTtSbHXfCo8Ww8Q", 130, 0, str(NOW_MS), str(NOW_MS), "Leader"],
        [1, None, 120, 10, str(NOW_MS - 40), str(NOW_MS - 900), "Follower"],
        [3, None, 130, 0, str(NOW_MS - 10), str(NOW_MS - 10), "Follower"],
        [4, None, 110, 20, str(NOW_MS - 5), str(NOW_MS - 2000), "Observer"],
    ]
    _, readable = replication_table(view, human_readable=True, now_ms=NOW_MS)
    assert readable[1][4:6] == ["40 ms ago", "900 ms ago"]
    assert [r["status"] for r in replication_json(view)] == ["Leader", "Follower", "Follower",
                                                             "Observer"]
    assert replication_json(view)[1] == {
        "node_id": 1, "directory_id": None, "log_end_offset": 120, "lag": 10,
        "last_fetch_timestamp": NOW_MS - 40, "last_caught_up_timestamp": NOW_MS - 900,
        "status": "Follower"}


def test_replication_before_v2_has_no_directory_column_and_unknown_times_are_minus_one() -> None:
    view = view_of(quorum_answer(1, voters=[replica(2, 9, NOW_MS, NOW_MS), replica(1, -1)]), 1)
    headers, rows = replication_table(view, human_readable=True, now_ms=NOW_MS)
    assert "DirectoryId" not in headers
    assert rows[1] == [1, -1, 10, "-1", "-1", "Follower"]


def test_kafka_uuid_form() -> None:
    assert kafka_uuid(uuid.UUID(int=0)) is None
    assert kafka_uuid(DIRECTORY) == "b5rY4yVsTtSbHXfCo8Ww8Q"


def test_cluster_view_sorts_brokers_and_keeps_racks() -> None:
    result = DescribeClusterResult(Node(2, "10.0.0.2", 9092), [
        Node(3, "10.0.0.3", 9092, "rack-b"), Node(1, "::1", 9092), Node(2, "10.0.0.2", 9092)],
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    view = cluster_view(result)
    assert (view.cluster_id, view.controller_id) == ("MkU3OEVBNTcwNTJENDM2Qg", 2)
    assert cluster_rows(view) == [(1, "[::1]:9092", None), (2, "10.0.0.2:9092", None),
                                  (3, "10.0.0.3:9092", "rack-b")]


def test_failure_message_says_what_to_try() -> None:
    named = QuorumQueryError(["127.0.0.1:9093: NOT_LEADER_OR_FOLLOWER"], leader_id=3)
    assert failure_message("--bootstrap-controller", named).endswith(
        "ask the leader, node 3, at its controller listener with --bootstrap-controller")
    unsupported = QuorumQueryError(["127.0.0.1:9092: no"], unsupported=True)
    assert failure_message("--bootstrap-server", unsupported).endswith(
        "ask the controllers with --bootstrap-controller")


@pytest.mark.parametrize(("argv", "expected"), [
    (["describe"], "one of the arguments --status --replication is required"),
    (["describe", "--status", "--replication"], "not allowed with argument"),
    (["--bootstrap-controller", "h:1", "describe", "--status", "--human-readable"],
     "--human-readable goes with --replication only"),
    (["--bootstrap-server", "h:1", "describe", "--status", "--bootstrap-controller", "h:2"],
     "not both"),
    (["describe", "--replication", "--bootstrap-controller", "h"], "expected HOST:PORT"),
])
def test_bad_flags_exit_2_with_one_line(argv: list[str], expected: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["metadata-quorum", *argv])
    except SystemExit as exc:  # argparse's own checks
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err and err.startswith("error: ") and err.count("\n") == 1


# ---- asking the quorum, of fake nodes -------------------------------------------------------

Answer = Callable[[int], Any]


def api_versions(describe_quorum_versions: tuple[int, int] | None) -> Any:
    """An ApiVersions v0 answer listing DescribeQuorum's (min, max) versions, or not at all."""
    listed = [] if describe_quorum_versions is None else [
        {"api_key": ApiKey.DESCRIBE_QUORUM, "min_version": describe_quorum_versions[0],
         "max_version": describe_quorum_versions[1]}]
    response_type = spec_for(ApiKey.API_VERSIONS).response_type(0)  # type: ignore[union-attr]
    return build(response_type, {"error_code": 0, "api_keys": listed})


class FakeNode:
    """A node on loopback: answers ApiVersions listing DescribeQuorum `versions` (None: not
    listed), then DescribeQuorum with `answer(version)` (None: closes the connection)."""

    def __init__(self, versions: tuple[int, int] | None, answer: Answer | None) -> None:
        self.versions, self.answer = versions, answer
        self.asked: list[int] = []
        self.address = ("127.0.0.1", 0)

    async def start(self) -> FakeNode:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.address = ("127.0.0.1", self.server.sockets[0].getsockname()[1])
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, body = parse_request(await reader.readexactly(size))
                decode_request_body(header, body)
                if header.api_key == ApiKey.API_VERSIONS:
                    response = api_versions(self.versions)
                else:
                    self.asked.append(header.api_version)
                    if self.answer is None:
                        return
                    response = self.answer(header.api_version)
                writer.write(encode_response(header.correlation_id, response))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


def ask(*nodes: FakeNode, given: int | None = None) -> Any:
    """describe_quorum of the first `given` nodes (default all), every node running."""
    async def scenario() -> Any:
        for node in nodes:
            await node.start()
        try:
            return await describe_quorum([n.address for n in nodes[:given]], timeout_s=5)
        finally:
            for node in nodes:
                node.server.close()

    return asyncio.run(scenario())


def test_the_highest_common_version_is_used() -> None:
    node = FakeNode((0, 1), lambda v: quorum_answer(v))
    answer = ask(node)
    assert node.asked == [1] and answer.version == 1
    assert answer.partition.leader_id == 2 and answer.endpoints == {}


def test_a_node_that_does_not_lead_sends_the_request_to_the_leader_it_names() -> None:
    leader = FakeNode((0, 2), lambda v: quorum_answer(v, leader=2))

    def not_leader(version: int) -> Any:
        nodes = [{"node_id": 2, "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1",
                                               "port": leader.address[1]}]}]
        return quorum_answer(version, error=6, leader=2, nodes=nodes)

    follower = FakeNode((0, 2), not_leader)
    answer = ask(follower, leader, given=1)  # the leader's address is not given
    assert answer.address == leader.address and answer.version == 2
    assert follower.asked == [2] and leader.asked == [2]


def test_when_no_node_leads_the_error_names_the_leader() -> None:
    follower = FakeNode((0, 2), lambda v: quorum_answer(v, error=6, leader=3, nodes=[]))
    with pytest.raises(QuorumQueryError) as caught:
        ask(follower)
    assert caught.value.leader_id == 3
    assert "NOT_LEADER_OR_FOLLOWER" in str(caught.value) and "leader is node 3" in str(
        caught.value)


def test_a_node_without_describe_quorum_and_one_that_closes_are_both_named() -> None:
    old, closing = FakeNode(None, None), FakeNode((0, 2), None)
    with pytest.raises(QuorumQueryError) as caught:
        ask(old, closing)
    assert caught.value.unsupported
    text = str(caught.value)
    assert f":{old.address[1]}: this node does not serve DescribeQuorum (UNSUPPORTED_VERSION)" \
        in text
    assert f":{closing.address[1]}: the node closed the connection" in text


def test_an_unreachable_controller_is_one_error_line() -> None:
    (port,) = free_ports(1)
    done = run_cli("metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe",
                   "--status")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"error: describing the metadata quorum: 127.0.0.1:{port}: "
                           "Connection refused\n")


# ---- real quorum replicas, in this process -------------------------------------------------

def test_real_quorum_replicas_answer_through_their_leader(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Three RaftDrivers behind loopback servers (which also answer ApiVersions, as a
    controller listener does): a follower alone names the leader; given after it, the leader
    describes the quorum in v2 with every voter's endpoint."""
    serve_quorum = quorum_harness.Node._respond

    async def respond(node: Any, frame: memoryview, peer: Any) -> list[bytes] | None:
        header, _ = parse_request(frame)
        if header.api_key != ApiKey.API_VERSIONS:
            return await serve_quorum(node, frame, peer)
        return [encode_response(header.correlation_id, api_versions((0, 2)))]

    monkeypatch.setattr(quorum_harness.Node, "_respond", respond)

    async def scenario() -> tuple[int, dict[int, Address], Any, Any]:
        quorum = quorum_harness.Quorum(tmp_path)
        await quorum.start()
        try:
            leader = await quorum.leader()
            await quorum.propose([b"one", b"two"])
            addresses = {i: ("127.0.0.1", n.port) for i, n in quorum.nodes.items()}
            follower = next(i for i in addresses if i != leader)
            with pytest.raises(QuorumQueryError) as refused:
                await describe_quorum([addresses[follower]], timeout_s=5)
            answer = await describe_quorum([addresses[follower], addresses[leader]], 5)
            return leader, addresses, refused.value, answer
        finally:
            await quorum.close()

    leader, addresses, refused, answer = asyncio.run(scenario())
    assert refused.leader_id == leader and "NOT_LEADER_OR_FOLLOWER" in str(refused)
    assert answer.address == addresses[leader] and answer.version == 2
    view = quorum_view(answer.partition, answer.endpoints, answer.version)
    assert view.leader_id == leader and view.high_watermark >= 3
    assert [v.node_id for v in view.voters] == [1, 2, 3]
    assert [v.endpoints for v in view.voters] == [
        (f"CONTROLLER://127.0.0.1:{addresses[i][1]}",) for i in (1, 2, 3)]
    assert [status for _, _, status in replication(view)] == ["Leader", "Follower", "Follower"]


# ---- a real cluster -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    nodes = ClusterProcess(Path(tmp_path_factory.mktemp("cluster-commands")))
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def ok(*argv: str) -> str:
    done = run_cli(*argv)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stderr}"
    return done.stdout


def status(text: str) -> dict[str, str]:
    pairs = [line.split(":", 1) for line in text.splitlines() if line.strip()]
    return {key: value.strip() for key, value in pairs}


def controllers(cluster: ClusterProcess, *ids: int) -> str:
    return ",".join(f"127.0.0.1:{cluster.controller_ports[i - 1]}" for i in ids)


def test_status_through_a_broker(cluster: ClusterProcess) -> None:
    fields = status(ok("metadata-quorum", "--bootstrap-server", cluster.nodes[0].bootstrap,
                       "describe", "--status"))
    assert list(fields) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark",
                            "MaxFollowerLag", "MaxFollowerLagTimeMs", "CurrentVoters",
                            "CurrentObservers"]
    assert fields["ClusterId"] == cluster.cluster_id
    assert int(fields["LeaderId"]) in (1, 2, 3)
    assert int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) > 0
    assert int(fields["MaxFollowerLag"]) >= 0
    voters = json.loads(fields["CurrentVoters"])
    assert [v["id"] for v in voters] == [1, 2, 3]
    assert [v["endpoints"] for v in voters] == [
        [f"CONTROLLER://127.0.0.1:{port}"] for port in cluster.controller_ports]
    assert json.loads(fields["CurrentObservers"]) == []


def test_status_of_the_controllers_agrees_with_the_brokers(cluster: ClusterProcess) -> None:
    of_controllers = json.loads(ok("metadata-quorum", "describe", "--status", "--json",
                                   "--bootstrap-controller", controllers(cluster, 1, 2, 3)))
    of_broker = json.loads(ok("metadata-quorum", "describe", "--status", "--json",
                              "--bootstrap-server", cluster.nodes[2].bootstrap))
    assert of_controllers["cluster_id"] is None and of_broker["cluster_id"] == cluster.cluster_id
    leader = of_controllers["leader_id"]
    assert leader in (1, 2, 3) and leader == of_broker["leader_id"]
    assert of_controllers["leader_epoch"] == of_broker["leader_epoch"]
    assert of_controllers["high_watermark"] > 0
    assert [v["id"] for v in of_controllers["current_voters"]] == [1, 2, 3]


def test_a_follower_controller_leads_to_the_leader_or_names_it(cluster: ClusterProcess) -> None:
    leader = json.loads(ok("metadata-quorum", "--bootstrap-controller",
                           controllers(cluster, 1, 2, 3), "describe", "--status", "--json")
                        )["leader_id"]
    follower = next(i for i in (1, 2, 3) if i != leader)
    done = run_cli("metadata-quorum", "--bootstrap-controller", controllers(cluster, follower),
                   "describe", "--status", "--json")
    if done.returncode == 0:  # the follower's answer listed the leader's endpoint
        assert json.loads(done.stdout)["leader_id"] == leader
    else:  # it named the leader only
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "NOT_LEADER_OR_FOLLOWER" in done.stderr
        assert f"ask the leader, node {leader}, at its controller listener" in done.stderr
    # the leader is found among several addresses, whichever comes first
    rest = [i for i in (1, 2, 3) if i != follower]
    assert json.loads(ok("metadata-quorum", "--bootstrap-controller",
                         controllers(cluster, follower, *rest), "describe", "--status",
                         "--json"))["leader_id"] == leader


def test_replication_table(cluster: ClusterProcess) -> None:
    started_ms = int(time.time() * 1000)
    rows = table(ok("metadata-quorum", "--bootstrap-server", cluster.nodes[1].bootstrap,
                    "describe", "--replication"))
    assert sorted(int(r["NodeId"]) for r in rows) == [1, 2, 3]
    assert [r["Status"] for r in rows] == ["Leader", "Follower", "Follower"]
    assert all(int(r["Lag"]) >= 0 and int(r["LogEndOffset"]) > 0 for r in rows)
    assert int(rows[0]["Lag"]) == 0
    for follower in rows[1:]:  # followers fetch all the time: seen within the last minute
        assert started_ms - 60_000 < int(follower["LastFetchTimestamp"]) <= \
            int(time.time() * 1000)


def test_replication_json_and_human_readable(cluster: ClusterProcess) -> None:
    rows = json.loads(ok("metadata-quorum", "--bootstrap-controller",
                         controllers(cluster, 3, 2, 1), "describe", "--replication", "--json"))
    assert sorted(r["node_id"] for r in rows) == [1, 2, 3]
    assert sum(r["status"] == "Leader" for r in rows) == 1
    assert all(r["lag"] == rows[0]["log_end_offset"] - r["log_end_offset"] for r in rows)
    text = ok("metadata-quorum", "--bootstrap-controller", controllers(cluster, 1, 2, 3),
              "describe", "--replication", "--human-readable")
    followers = [line for line in text.splitlines() if line.rstrip().endswith("Follower")]
    assert len(followers) == 2
    assert all(re.search(r"\d+ ms ago\s+\d+ ms ago\s+Follower$", line.rstrip())
               for line in followers)


def test_cluster_describe_lists_every_broker(cluster: ClusterProcess) -> None:
    document = json.loads(ok("cluster", "describe", "--json", "--bootstrap-server",
                             cluster.nodes[0].bootstrap))
    assert document["cluster_id"] == cluster.cluster_id
    assert [b["id"] for b in document["brokers"]] == [1, 2, 3]
    assert [f"{b['host']}:{b['port']}" for b in document["brokers"]] == [
        n.bootstrap for n in cluster.nodes]
    assert document["controller_id"] in (1, 2, 3)
    text = ok("cluster", "describe", "--bootstrap-server", cluster.bootstrap)
    head, _, brokers = text.partition("\n\n")
    fields = status(head)  # a KRaft broker names a live broker, whichever librdkafka asked
    assert list(fields) == ["Cluster ID", "Controller ID"]
    assert fields["Cluster ID"] == cluster.cluster_id and fields["Controller ID"] in ("1", "2", "3")
    assert [(r["ID"], r["HOST:PORT"]) for r in table(brokers)] == [
        (str(i + 1), n.bootstrap) for i, n in enumerate(cluster.nodes)]


def test_cluster_id(cluster: ClusterProcess) -> None:
    assert ok("cluster", "cluster-id", "--bootstrap-server", cluster.nodes[2].bootstrap) == \
        f"Cluster ID: {cluster.cluster_id}\n"
    assert json.loads(ok("cluster", "cluster-id", "--json", "--bootstrap-server",
                         cluster.nodes[1].bootstrap)) == {"cluster_id": cluster.cluster_id}
