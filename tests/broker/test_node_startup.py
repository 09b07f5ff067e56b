"""Start-up of a node with KRaft settings (roles, voters, listeners), observed through the real
process's exit code and stderr: each setting that cannot work is one `error:` line and exit code
2 before anything is written; a member of a controller quorum refuses directories `spark-log
storage format` has not formatted for it with one ERROR line, and starts on formatted ones; the
single node of today formats a new directory itself, as Kafka's v1 meta.properties."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.test_startup import (
    assert_one_error_line,
    loaded_line,
    refused_start,
    snapshot,
    start_logged,
)
from tests.broker_process import BrokerProcess
from tests.cluster_process import free_ports

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
OTHER_CLUSTER = "NjY4MzQxNjY0MjNENDMzQQ"
CONTROLLER_PORT = 19093  # in voter entries only: nothing binds it yet
VOTER = f"0@127.0.0.1:{CONTROLLER_PORT}"
CONTROLLER_LISTENER = f"CONTROLLER://127.0.0.1:{CONTROLLER_PORT}"


def settings(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("--config", pair)]


def quorum_member(*extra: str) -> list[str]:
    """Node 0 of a quorum of one voter, with its controller listener."""
    return settings(f"controller.quorum.voters={VOTER}",
                    f"listeners=PLAINTEXT://127.0.0.1:0,{CONTROLLER_LISTENER}", *extra)


MISCONFIGURED: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "an unknown role": (settings("process.roles=broker,bruker"),
                        ("process.roles: unknown process role 'bruker'",)),
    "a voter entry that does not parse": (
        settings("controller.quorum.voters=0@localhost"),
        ("controller.quorum.voters: cannot parse the host and port of '0@localhost'",)),
    "duplicate voter ids": (
        settings(f"controller.quorum.voters={VOTER},0@127.0.0.1:19094"),
        ("controller.quorum.voters: voter id 0 is given twice",)),
    "a controller missing from the voters": (
        settings("controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19093"),
        ("the node id 0 must be included in the set of voters controller.quorum.voters={1, 2}",)),
    "a broker-only node listed as a voter": (
        settings("process.roles=broker", f"controller.quorum.voters={VOTER}"),
        ("'broker' role, the node id 0 must not be included in the set of voters",)),
    "a broker-only node without voters": (
        settings("process.roles=broker"), ("process.roles=broker needs controller.quorum.voters",)),
    "voters but no controller listener": (
        settings(f"controller.quorum.voters={VOTER}"),
        ("CONTROLLER is not a listener of this node",
         f"add CONTROLLER://127.0.0.1:{CONTROLLER_PORT}")),
    "a controller listener off its voter port": (
        quorum_member("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19095"),
        ("gives node 0 the address 127.0.0.1:19093, but its controller listener CONTROLLER is "
         "on port 19095",)),
    "the controller listener as inter-broker listener": (
        quorum_member("inter.broker.listener.name=CONTROLLER"),
        ("inter.broker.listener.name=CONTROLLER is a controller listener",)),
    "a listener without a security protocol": (
        settings("listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"),
        ("listener INTERNAL has no security protocol",)),
    "a listener that is not plaintext": (
        settings("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:19096"),
        ("listener SSL uses security protocol SSL", "only PLAINTEXT is served")),
    "an unknown security protocol": (
        settings("listener.security.protocol.map=PLAINTEXT:TLS"),
        ("Invalid security protocol `TLS`",)),
    "duplicate listener names": (
        settings("listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:1,INTERNAL://:2",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"),
        ("listener INTERNAL is given twice",)),
    "duplicate listener ports": (
        settings("listeners=PLAINTEXT://127.0.0.1:0,A://127.0.0.1:19097,B://:19097",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,A:PLAINTEXT,B:PLAINTEXT"),
        ("listeners A and B both use port 19097",)),
    "an advertised listener for an unknown listener": (
        settings("advertised.listeners=INTERNAL://broker-1:9093",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"),
        ("advertised.listeners: listener INTERNAL is not one of the listeners (PLAINTEXT)",)),
    "an advertised meta-address": (
        settings("advertised.listeners=PLAINTEXT://0.0.0.0:9092"),
        ("cannot use the nonroutable meta-address 0.0.0.0",)),
    "a controller-only node with a broker listener": (
        quorum_member("process.roles=controller"),
        ("process.roles=controller: listener PLAINTEXT is not a controller listener",)),
    "a broker-only node serving the controller listener": (
        ["--broker-id", "3", *settings("process.roles=broker", f"controller.quorum.voters={VOTER}",
                                       f"listeners=PLAINTEXT://127.0.0.1:0,{CONTROLLER_LISTENER}")],
        ("must not contain a value appearing in the 'listeners' configuration when running KRaft "
         "with just the broker role",)),
    "node.id and broker.id that differ": (
        ["--broker-id", "1", *settings("broker.id=2")],
        ("You must set `node.id` to the same value as `broker.id`",)),
}


@pytest.mark.parametrize("case", list(MISCONFIGURED))
def test_a_misconfigured_node_exits_with_one_line(tmp_path: Path, case: str) -> None:
    args, fragments = MISCONFIGURED[case]
    code, stderr = refused_start(tmp_path / "data", *args)
    assert code == 2, (code, stderr)
    assert len(stderr) == 1 and stderr[0].startswith("error: "), stderr
    for fragment in fragments:
        assert fragment in stderr[0], (fragment, stderr[0])
    assert not (tmp_path / "data").exists()  # refused before anything was created


# ---- a quorum member's directories ----------------------------------------------------------


def storage_format(data_dir: Path, *args: str, cluster: str = CLUSTER) -> None:
    done = subprocess.run([sys.executable, "-m", "spark_log.cli.main", "storage", "format",
                           "--cluster-id", cluster, "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_quorum_member_refuses_an_unformatted_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    code, stderr = refused_start(data_dir, *quorum_member())
    assert_one_error_line(code, stderr, f"No meta.properties in {data_dir}",
                          "run `spark-log storage format --cluster-id ID`")
    assert not data_dir.exists()


def test_a_quorum_member_refuses_an_unformatted_metadata_directory(tmp_path: Path) -> None:
    data_dir, meta_dir = tmp_path / "data", tmp_path / "meta"
    storage_format(data_dir, *quorum_member())
    before = snapshot(tmp_path)
    code, stderr = refused_start(data_dir, *quorum_member(f"metadata.log.dir={meta_dir}"))
    assert_one_error_line(code, stderr, f"No meta.properties in {meta_dir}")
    assert snapshot(tmp_path) == before


def test_a_quorum_member_refuses_directories_of_two_clusters(tmp_path: Path) -> None:
    data_dir, meta_dir = tmp_path / "data", tmp_path / "meta"
    storage_format(data_dir, *quorum_member())
    storage_format(meta_dir, *quorum_member(), cluster=OTHER_CLUSTER)
    before = snapshot(tmp_path)
    code, stderr = refused_start(data_dir, *quorum_member(f"metadata.log.dir={meta_dir}"))
    assert_one_error_line(code, stderr, f"{meta_dir / 'meta.properties'}",
                          f"belongs to cluster {OTHER_CLUSTER}", f"to cluster {CLUSTER}")
    assert snapshot(tmp_path) == before


def test_a_quorum_member_refuses_a_directory_of_another_cluster(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    storage_format(data_dir, *quorum_member(), cluster=OTHER_CLUSTER)
    before = snapshot(tmp_path)
    code, stderr = refused_start(data_dir, *quorum_member(f"cluster.id={CLUSTER}"))
    assert_one_error_line(code, stderr, f"belongs to cluster {OTHER_CLUSTER}",
                          f"configured with cluster.id={CLUSTER}")
    assert snapshot(tmp_path) == before


def test_a_quorum_member_refuses_a_directory_of_another_node(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    storage_format(data_dir, *quorum_member())
    port = CONTROLLER_PORT + 10
    code, stderr = refused_start(
        data_dir, "--broker-id", "1",
        *settings(f"controller.quorum.voters={VOTER},1@127.0.0.1:{port}",
                  f"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://:{port}"))
    assert_one_error_line(code, stderr, "belongs to node 0, but this broker is node 1")


def test_a_formatted_quorum_member_starts_and_serves(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    config = {"controller.quorum.voters": f"0@127.0.0.1:{port}",
              "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"}
    data_dir = tmp_path / "data"
    storage_format(data_dir, *settings(*(f"{k}={v}" for k, v in config.items())))
    broker = BrokerProcess(data_dir, tmp_path / "broker.log", config)
    try:
        line = loaded_line(start_logged(broker, "member"))
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
        assert list(metadata.brokers) == [0] and metadata.cluster_id == CLUSTER
    finally:
        assert broker.stop() == 0
    assert "Loaded 0 partitions" in line


def test_the_single_node_formats_a_new_directory_as_kafka_does(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        start_logged(broker, "first")
    finally:
        assert broker.stop() == 0
    lines = (tmp_path / "data" / "meta.properties").read_text().splitlines()
    keys = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    assert sorted(keys) == ["cluster.id", "directory.id", "node.id", "version"]
    assert keys["version"] == "1" and keys["node.id"] == "0"
    assert len(keys["cluster.id"]) == 22 and len(keys["directory.id"]) == 22
