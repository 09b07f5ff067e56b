"""Broker start-up against its data directory, observed through the real process's exit code
and stderr: what the start says about the previous shutdown (new directory, clean, after
SIGKILL), and the one-line refusals of a damaged or foreign meta.properties and of a data
directory that is not a usable directory, which leave every stored file as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

EXIT_TIMEOUT_S = 120  # a start refused before listening; generous for a loaded machine
CONFIG_ERROR_EXIT = 2  # what the broker exits with on a setting or data directory it refuses


# ---- helpers --------------------------------------------------------------------------------


def loaded_line(log: str) -> str:
    """The storage layer's start-up line: how many partitions, and how the directory was left."""
    lines = [line for line in log.splitlines() if " Loaded " in line and "log_manager" in line]
    assert len(lines) == 1, log
    return lines[0]


def start_logged(broker: BrokerProcess, name: str) -> str:
    """Start `broker` with its output in a log of its own; that start's output."""
    broker.log_path = broker.log_path.with_name(f"{name}.log")
    broker.start()
    return broker.log()


def fill(broker: BrokerProcess, topic: str, partitions: int, records: int) -> None:
    """Create `topic` and produce `records` records to it, all acknowledged."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for n in range(records):
        producer.produce(topic, value=f"record-{n}".encode(), partition=n % partitions)
    assert producer.flush(30) == 0


def refused_start(data_dir: Path, *args: str, prefix: Sequence[str] = ()
                  ) -> tuple[int, list[str]]:
    """Run the broker on `data_dir` (under the `prefix` command) until it exits; its exit code
    and stderr lines."""
    argv = [*prefix, sys.executable, "-m", "spark_log.broker", "--data-dir", str(data_dir),
            "--host", "127.0.0.1", "--port", "0", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.splitlines()


def assert_one_error_line(code: int, stderr: list[str], *fragments: str) -> None:
    assert code == CONFIG_ERROR_EXIT, (code, stderr)
    assert len(stderr) == 1, stderr
    assert " ERROR " in stderr[0] and "Traceback" not in stderr[0], stderr
    for fragment in fragments:
        assert fragment in stderr[0], (fragment, stderr[0])


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root` with its bytes and modification time."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---- what the start says about the previous shutdown ----------------------------------------


def test_a_new_data_directory_has_nothing_to_recover(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        line = loaded_line(start_logged(broker, "first"))
    finally:
        assert broker.stop() == 0
    assert "Loaded 0 partitions" in line
    assert "(new data directory, nothing to recover)" in line
    assert "unclean" not in line


def test_a_restart_after_a_clean_shutdown_says_clean(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        start_logged(broker, "first")
        fill(broker, "orders", 2, 10)
        assert broker.stop() == 0
        line = loaded_line(start_logged(broker, "second"))
    finally:
        assert broker.stop() == 0
    assert "Loaded 2 partitions" in line and "(clean shutdown)" in line
    assert "unclean" not in line and "new data directory" not in line


def test_a_restart_after_sigkill_says_unclean(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        start_logged(broker, "first")
        fill(broker, "orders", 2, 10)
        broker.kill()
        assert broker.proc is not None and broker.proc.returncode == -9
        line = loaded_line(start_logged(broker, "second"))
    finally:
        assert broker.stop() == 0
    assert "Loaded 2 partitions" in line
    assert "(unclean shutdown: logs recovered from their recovery points)" in line


def test_a_used_directory_killed_before_any_topic_still_says_unclean(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        start_logged(broker, "first")
        broker.kill()
        line = loaded_line(start_logged(broker, "second"))
    finally:
        assert broker.stop() == 0
    assert "Loaded 0 partitions" in line and "(unclean shutdown" in line


# ---- meta.properties that does not fit ------------------------------------------------------


@pytest.fixture(scope="module")
def used_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory a broker used and shut down cleanly: a topic with records in it."""
    root = tmp_path_factory.mktemp("used")
    broker = BrokerProcess(root / "data", root / "broker.log").start()
    try:
        fill(broker, "orders", 2, 10)
    finally:
        assert broker.stop() == 0, broker.log()
    return root / "data"


@pytest.fixture
def data_dir(used_data_dir: Path, tmp_path: Path) -> Iterator[Path]:
    copy = tmp_path / "data"
    shutil.copytree(used_data_dir, copy)
    yield copy


def stored_cluster_id(data_dir: Path) -> str:
    for line in (data_dir / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.partition("=")[2]
    raise AssertionError("no cluster.id in the broker's meta.properties")


DAMAGED = {
    "not key=value lines": (b"garbage\n", ":1: expected key=value, got 'garbage'"),
    "not text": (b"\xff\xfe\x00\x01", "not a text file"),
    "no version": (b"cluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=0\n", "no version"),
    "an unknown version": (b"version=7\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=0\n",
                           "unknown version '7'"),
    "no node.id": (b"version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n", "no node.id"),
    "no cluster.id": (b"version=1\nnode.id=0\n", "no cluster.id"),
    "a node.id that is not a number": (
        b"version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=zero\n",
        "node.id 'zero' is not a non-negative integer"),
    "a v0 file without broker.id": (b"version=0\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=0\n",
                                    "no broker.id"),
}


@pytest.mark.parametrize("fault", list(DAMAGED))
def test_a_damaged_meta_properties_is_one_error_line_and_changes_nothing(
        data_dir: Path, fault: str) -> None:
    content, reason = DAMAGED[fault]
    (data_dir / "meta.properties").write_bytes(content)
    before = snapshot(data_dir)
    code, stderr = refused_start(data_dir)
    assert_one_error_line(code, stderr, str(data_dir / "meta.properties"), reason)
    assert snapshot(data_dir) == before


def test_a_data_directory_of_another_node_is_refused(data_dir: Path) -> None:
    before = snapshot(data_dir)
    code, stderr = refused_start(data_dir, "--broker-id", "3")
    assert_one_error_line(code, stderr, str(data_dir / "meta.properties"),
                          "belongs to node 0, but this broker is node 3")
    assert snapshot(data_dir) == before


def test_a_data_directory_of_another_cluster_is_refused(data_dir: Path) -> None:
    stored = stored_cluster_id(data_dir)
    before = snapshot(data_dir)
    code, stderr = refused_start(data_dir, "--config", "cluster.id=BBBBBBBBBBBBBBBBBBBBBB")
    assert_one_error_line(code, stderr, str(data_dir / "meta.properties"),
                          f"belongs to cluster {stored}",
                          "configured with cluster.id=BBBBBBBBBBBBBBBBBBBBBB")
    assert snapshot(data_dir) == before


def test_a_v0_meta_properties_with_the_same_broker_id_is_accepted(data_dir: Path) -> None:
    stored = stored_cluster_id(data_dir)
    v0 = f"version=0\nbroker.id=0\ncluster.id={stored}\n".encode()
    (data_dir / "meta.properties").write_bytes(v0)
    broker = BrokerProcess(data_dir, data_dir.parent / "broker.log")
    try:
        line = loaded_line(start_logged(broker, "v0"))
    finally:
        assert broker.stop() == 0
    assert "Loaded 2 partitions" in line and "(clean shutdown)" in line
    assert (data_dir / "meta.properties").read_bytes() == v0  # read, never rewritten


# ---- a data directory that is not a usable directory ----------------------------------------


def test_a_data_dir_that_is_a_regular_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"not a directory")
    code, stderr = refused_start(path)
    assert_one_error_line(code, stderr, f"data directory {path} is not a directory")
    assert path.read_bytes() == b"not a directory"


def test_a_data_dir_below_a_regular_file_is_one_error_line(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"a file")
    code, stderr = refused_start(blocker / "data")
    assert_one_error_line(code, stderr, f"cannot create data directory {blocker / 'data'}",
                          f"{blocker} is not a directory")
    assert blocker.read_bytes() == b"a file"


def bound_by_permissions() -> list[str]:
    """A command prefix under which the broker obeys permission bits: none for a normal user;
    for root, setpriv without the capabilities that let root read and write anything."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise AssertionError("root ignores permission bits, and setpriv is not there to drop that")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]


def test_a_data_dir_without_write_permission_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.mkdir(mode=0o500)
    try:
        code, stderr = refused_start(path, prefix=bound_by_permissions())
        assert list(path.iterdir()) == []
    finally:
        path.chmod(0o700)
    assert_one_error_line(code, stderr, f"data directory {path} is not readable and writable")


def test_a_data_dir_that_cannot_be_created_is_one_error_line(tmp_path: Path) -> None:
    parent = tmp_path / "read-only"
    parent.mkdir(mode=0o500)
    try:
        code, stderr = refused_start(parent / "data", prefix=bound_by_permissions())
        assert list(parent.iterdir()) == []
    finally:
        parent.chmod(0o700)
    assert_one_error_line(code, stderr, f"cannot create data directory {parent / 'data'}",
                          "Permission denied")
