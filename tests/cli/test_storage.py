"""`spark-log storage random-uuid|format|info`, run as a user runs it: cluster ids in Kafka's
form, meta.properties written into every log directory and the metadata log directory, the
refusals kafka-storage.sh makes (a directory already formatted, of another cluster or node, a
controller without voters and without --standalone), and what `info` tells of each directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from spark_log.storage.data_dir.meta_properties import uuid_problem
from tests.cli.conftest import run_cli

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
OTHER_CLUSTER = "NjY4MzQxNjY0MjNENDMzQQ"
QUORUM = ["--config", "controller.quorum.voters=1@127.0.0.1:19093",
          "--config", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19093"]


def stored(data_dir: Path) -> dict[str, str]:
    lines = (data_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def storage(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("storage", *args)


def failed(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert done.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def server_properties(tmp_path: Path) -> Path:
    """A Kafka-style file for node 1 of a quorum, with two log dirs and a metadata dir."""
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        "controller.quorum.voters=1@127.0.0.1:19093\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19093\n"
        f"log.dirs={tmp_path / 'logs-a'},{tmp_path / 'logs-b'}\n"
        f"metadata.log.dir={tmp_path / 'metadata'}\n")
    return path


def test_random_uuid_prints_a_new_kafka_cluster_id() -> None:
    ids = {storage("random-uuid").stdout.strip() for _ in range(3)}
    assert len(ids) == 3
    for cluster_id in ids:
        assert len(cluster_id) == 22 and uuid_problem(cluster_id) is None


def test_format_writes_every_log_dir_and_the_metadata_dir(server_properties: Path) -> None:
    done = storage("format", "--cluster-id", CLUSTER, "--config-file", str(server_properties))
    assert done.returncode == 0, done.stderr
    root = server_properties.parent
    assert done.stdout.splitlines() == [
        f"Formatting data directory {root / 'logs-a'} for cluster {CLUSTER}, node 1.",
        f"Formatting data directory {root / 'logs-b'} for cluster {CLUSTER}, node 1.",
        f"Formatting metadata directory {root / 'metadata'} for cluster {CLUSTER}, node 1."]
    written = [stored(root / d) for d in ("logs-a", "logs-b", "metadata")]
    for meta in written:
        assert {k: meta[k] for k in ("version", "cluster.id", "node.id")} == {
            "version": "1", "cluster.id": CLUSTER, "node.id": "1"}
        assert uuid_problem(meta["directory.id"]) is None
    assert len({meta["directory.id"] for meta in written}) == 3


def test_format_refuses_a_formatted_directory_unless_told_to_ignore_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    flags = ["--cluster-id", CLUSTER, "--data-dir", str(data_dir), "--broker-id", "1", *QUORUM]
    assert storage("format", *flags).returncode == 0
    first = (data_dir / "meta.properties").read_bytes()
    failed(storage("format", *flags), f"Log directory {data_dir} is already formatted. Use "
                                      "--ignore-formatted")
    again = storage("format", "--ignore-formatted", *flags)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "All of the log directories are already formatted.\n"
    assert (data_dir / "meta.properties").read_bytes() == first


def test_format_ignores_only_a_directory_of_its_own(tmp_path: Path) -> None:
    formatted, new = tmp_path / "formatted", tmp_path / "new"
    base = [*QUORUM, "--ignore-formatted"]
    assert storage("format", "--cluster-id", CLUSTER, "--data-dir", str(formatted),
                   "--broker-id", "1", *base).returncode == 0
    first = (formatted / "meta.properties").read_bytes()
    both = ["--config", f"log.dirs={formatted},{new}"]
    failed(storage("format", "--cluster-id", OTHER_CLUSTER, "--broker-id", "1", *base, *both),
           f"{formatted / 'meta.properties'}: the directory is formatted for cluster {CLUSTER}, "
           f"not {OTHER_CLUSTER}")
    assert not new.exists()
    other_node = ["--broker-id", "2", "--config",
                  "controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19093"]
    failed(storage("format", "--cluster-id", CLUSTER, *base, *both, *other_node),
           "the directory is formatted for node 1, not 2")
    assert not new.exists()
    done = storage("format", "--cluster-id", CLUSTER, "--broker-id", "1", *base, *both)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Formatting data directory {new} for cluster {CLUSTER}, node 1.\n"
    assert (formatted / "meta.properties").read_bytes() == first
    assert stored(new)["cluster.id"] == CLUSTER


@pytest.mark.parametrize(("args", "fragments"), [
    (["--cluster-id", "not-a-uuid"], ("Cluster ID string not-a-uuid does not appear to be a "
                                      "valid UUID",)),
    (["--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA"], ("a reserved UUID",)),
    (["--cluster-id", CLUSTER], ("Because controller.quorum.voters is not set on this "
                                 "controller", "--standalone")),
    (["--cluster-id", CLUSTER, "--standalone", "--config", "process.roles=broker",
      "--config", "controller.quorum.voters=1@127.0.0.1:19093"],
     ("You can only use --standalone on a controller.",)),
    (["--cluster-id", CLUSTER, "--standalone", *QUORUM, "--broker-id", "1", "--config",
      "controller.quorum.voters=1@127.0.0.1:19093,2@h:1"],
     ("--standalone formats a quorum of this node alone, but controller.quorum.voters also "
      "lists [2]",)),
    (["--cluster-id", CLUSTER, "--standalone", "--config", f"cluster.id={OTHER_CLUSTER}"],
     (f"--cluster-id {CLUSTER} is not the cluster.id of the settings ({OTHER_CLUSTER})",)),
    (["--cluster-id", CLUSTER, "--config", "process.roles=brokers"],
     ("process.roles: unknown process role 'brokers'",)),
])
def test_format_refusals_are_one_line(tmp_path: Path, args: list[str],
                                      fragments: tuple[str, ...]) -> None:
    failed(storage("format", "--data-dir", str(tmp_path / "data"), *args), *fragments)
    assert not (tmp_path / "data").exists()


def test_format_without_a_directory_or_cluster_id(tmp_path: Path) -> None:
    failed(storage("format", "--cluster-id", CLUSTER, "--standalone"),
           "a data directory is required")
    usage = storage("format", "--data-dir", str(tmp_path))
    assert usage.returncode == 2 and "--cluster-id" in usage.stderr


def test_a_standalone_format_is_what_the_single_node_writes_itself(tmp_path: Path) -> None:
    done = storage("format", "--cluster-id", CLUSTER, "--data-dir", str(tmp_path / "data"),
                   "--standalone", "--broker-id", "4")
    assert done.returncode == 0, done.stderr
    assert {k: v for k, v in stored(tmp_path / "data").items() if k != "directory.id"} == {
        "version": "1", "cluster.id": CLUSTER, "node.id": "4"}


def test_info_tells_what_each_directory_holds(server_properties: Path) -> None:
    root = server_properties.parent
    unformatted = storage("info", "--config-file", str(server_properties))
    assert unformatted.returncode == 1
    assert unformatted.stdout.splitlines() == [
        "Found problems:", f"  {root / 'logs-a'} does not exist",
        f"  {root / 'logs-b'} does not exist", f"  {root / 'metadata'} does not exist", ""]
    assert storage("format", "--cluster-id", CLUSTER, "--config-file",
                   str(server_properties)).returncode == 0
    done = storage("info", "--config-file", str(server_properties))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Found log directories:" and len(lines) == 5
    assert lines[1].startswith(f"  {root / 'logs-a'}: version=1 cluster.id={CLUSTER} node.id=1 "
                               "directory.id=")


def test_info_finds_directories_that_disagree(server_properties: Path) -> None:
    root = server_properties.parent
    for name, cluster in (("logs-a", CLUSTER), ("logs-b", OTHER_CLUSTER)):
        assert storage("format", "--cluster-id", cluster, "--config-file",
                       str(server_properties), "--config", f"log.dirs={root / name}",
                       "--config", f"metadata.log.dir={root / name}").returncode == 0
    (root / "metadata").mkdir()
    done = storage("info", "--config-file", str(server_properties), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert [(d["path"], d["formatted"], d["cluster_id"]) for d in report["directories"]] == [
        (str(root / "logs-a"), True, CLUSTER), (str(root / "logs-b"), True, OTHER_CLUSTER),
        (str(root / "metadata"), False, None)]
    assert report["problems"] == [f"{root / 'metadata'} is not formatted",
                                  "Mismatched cluster IDs between storage directories."]


def test_info_names_a_damaged_meta_properties(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("version=1\nnode.id=0\n")
    done = storage("info", "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 1
    assert f"{tmp_path / 'data' / 'meta.properties'}: no cluster.id" in done.stdout
