"""Broker start-up against its data directory, observed through the real process's exit code
and stderr: what the start says about the previous shutdown (new directory, clean, after
SIGKILL); the one-line refusals of a damaged or foreign meta.properties, a damaged topics.json
or producer-id-block and of a data directory that is not a usable directory, which leave every
stored file as it was; and the small files that are rebuilt instead (a missing topics.json, a
damaged broker.json or .lock)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from spark_log.protocol.api_keys import ApiKey
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess
from tests.legacy_data_dir import as_before_the_metadata_log

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


def test_a_node_restarted_after_sigkill_registers_without_waiting_out_its_old_session(
        tmp_path: Path) -> None:
    # The restarted controller still counts the killed incarnation's session, but that
    # incarnation was this node's earlier process: its own broker is registered at once, and
    # the records written before the kill are served again.
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    try:
        start_logged(broker, "first")
        fill(broker, "orders", 2, 10)
        broker.kill()
        log = start_logged(broker, "second")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("orders", p, 0) for p in (0, 1)])
            values = set()
            for _ in range(100):
                if len(values) == 10:
                    break
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    values.add(message.value())
        finally:
            consumer.close()
    finally:
        assert broker.stop() == 0
    assert values == {f"record-{n}".encode() for n in range(10)}
    assert "registered with the controller" in log
    assert "registration refused" not in log and "session expired" not in log, log
    # Kafka's order: the restarted broker applies the metadata from its registration on, where
    # the killed incarnation's leaderships are already gone. It takes each one once, at its new
    # epoch, never first the leadership the replayed log still named.
    registered = log.index("registered with the controller")
    for p in (0, 1):
        taken = [m.start() for m in re.finditer(f"orders-{p}: leader at epoch", log)]
        assert len(taken) == 1 and taken[0] > registered, log
    assert "no longer the leader" not in log, log


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


# ---- topics.json that cannot be used, or is missing ----------------------------------------


def edited(change: Callable[[dict[str, Any]], object]) -> Callable[[bytes], bytes]:
    """A damage that parses the broker's topics.json, applies `change` and writes it back."""

    def edit(original: bytes) -> bytes:
        doc = json.loads(original)
        change(doc)
        return json.dumps(doc).encode()

    return edit


def orders(doc: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in doc["topics"] if t["name"] == "orders")


def second_topic(doc: dict[str, Any], **fields: Any) -> None:
    doc["topics"].append({**orders(doc), **fields})


NIL_UUID = "00000000-0000-0000-0000-000000000000"
TOPICS_DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "garbage bytes": (lambda _: b"\x00\xff\x13garbage\x9c", ": not JSON ("),
    "an empty file": (lambda _: b"", ": empty file;"),
    "truncated JSON": (lambda original: original[: len(original) // 2], ": not JSON ("),
    "a list, not an object": (lambda _: b"[]", ": not the expected structure"),
    "no topics list": (lambda _: b'{"version": 1}', ": not the expected structure"),
    "another version": (edited(lambda d: d.update(version=2)), "unknown version 2 (expected 1)"),
    "a topic that is not an object": (edited(lambda d: d["topics"].append("orders2")),
                                      "topics[1] is not an object with a name"),
    "an invalid topic name": (edited(lambda d: orders(d).update(name="bad topic")),
                              "topics[0] has an invalid name"),
    "an id that is not a uuid": (edited(lambda d: orders(d).update(id="not-a-uuid")),
                                 "topic 'orders' has id 'not-a-uuid', which is not a topic id"),
    "the nil uuid": (edited(lambda d: orders(d).update(id=NIL_UUID)),
                     "which is not a topic id"),
    "a negative partition count": (edited(lambda d: orders(d).update(partitions=-2)),
                                   "topic 'orders' has partition count -2"),
    "a partition count that is text": (edited(lambda d: orders(d).update(partitions="2")),
                                       "topic 'orders' has partition count '2'"),
    "a config that does not parse": (
        edited(lambda d: orders(d).update(configs={"retention.ms": "a week"})),
        "topic 'orders' has a config that does not parse: Invalid value a week for "
        "configuration retention.ms"),
    "an unknown config": (edited(lambda d: orders(d).update(configs={"retention.weeks": "1"})),
                          "Unknown topic config name: retention.weeks"),
    "a config value that is a number": (
        edited(lambda d: orders(d).update(configs={"retention.ms": 1000})),
        "topic 'orders' has configs that are not an object of strings"),
    "a topic listed twice": (edited(second_topic), "topic 'orders' is listed twice"),
    "two topics with one id": (edited(lambda d: second_topic(d, name="payments")),
                               "topics 'orders' and 'payments' have the same id"),
}


@pytest.mark.parametrize("fault", list(TOPICS_DAMAGE))
def test_a_damaged_topics_json_is_one_error_line_and_changes_nothing(data_dir: Path,
                                                                     fault: str) -> None:
    damage, reason = TOPICS_DAMAGE[fault]
    as_before_the_metadata_log(data_dir)
    path = data_dir / "topics.json"
    path.write_bytes(damage(path.read_bytes()))
    before = snapshot(data_dir)
    code, stderr = refused_start(data_dir)
    assert_one_error_line(code, stderr, f"{path}: ", reason, "restore the file from a backup",
                          "move it away to have the topics rebuilt")
    assert snapshot(data_dir) == before


def test_without_topics_json_topics_are_rebuilt_and_internal_ones_stay_compacted(
        tmp_path: Path) -> None:
    config = {"offsets.topic.num.partitions": "1"}
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config)
    try:
        start_logged(broker, "first")
        fill(broker, "orders", 2, 10)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing"})
        consumer.commit(offsets=[TopicPartition("orders", 1, 4)], asynchronous=False)
        consumer.close()
        assert broker.stop() == 0
        as_before_the_metadata_log(broker.data_dir)
        (broker.data_dir / "topics.json").unlink()
        log = start_logged(broker, "second")
        assert "adopted topics found on disk but missing from topics.json" in log
        assert "__consumer_offsets, orders" in log
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert len(admin.list_topics(timeout=30).topics["orders"].partitions) == 2
        resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
        described = admin.describe_configs([resource])[resource].result(30)
        assert described["cleanup.policy"].value == "compact"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing"})
        assert consumer.committed([TopicPartition("orders", 1)], timeout=30)[0].offset == 4
        consumer.close()
    finally:
        assert broker.stop() == 0
    assert not (broker.data_dir / "topics.json").exists()  # the metadata log holds them now


# ---- producer-id-block, broker.json and .lock -----------------------------------------------


PRODUCER_ID_DAMAGE = {
    "garbage bytes": (b"\x00\xffjunk", ": '\\x00\ufffdjunk' is not a non-negative number"),
    "an empty file": (b"", ": empty file;"),
    "a negative number": (b"-1000\n", "not a non-negative number"),
    "a number with garbage after it": (b"2000x\n", ": '2000x\\n' is not a non-negative"),
    "a number beyond 64 bits": (b"99999999999999999999999\n",
                                "more than the largest block end 64-bit producer ids allow"),
}


@pytest.mark.parametrize("fault", list(PRODUCER_ID_DAMAGE))
def test_a_damaged_producer_id_block_is_one_error_line_and_changes_nothing(
        data_dir: Path, fault: str) -> None:
    content, reason = PRODUCER_ID_DAMAGE[fault]
    as_before_the_metadata_log(data_dir)
    path = data_dir / "producer-id-block"
    path.write_bytes(content)
    before = snapshot(data_dir)
    code, stderr = refused_start(data_dir)
    assert_one_error_line(code, stderr, f"{path}: ", reason,
                          "write into it a number above every producer id")
    assert snapshot(data_dir) == before


def test_a_producer_id_block_written_by_hand_hands_out_ids_from_there(data_dir: Path) -> None:
    as_before_the_metadata_log(data_dir)
    path = data_dir / "producer-id-block"
    path.write_bytes(b"5000000\n")
    broker = BrokerProcess(data_dir, data_dir.parent / "broker.log")
    try:
        start_logged(broker, "raised")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        producer.produce("orders", b"after the edit", partition=0)
        assert producer.flush(30) == 0
        with RawClient(broker.bootstrap) as client:
            described = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
                "topics": [{"name": "orders", "partition_indexes": [0]}]})
        (state,) = described.topics[0].partitions[0].active_producers
        # The block starts there; a client whose InitProducerId timed out on a busy machine
        # asks again and gets the next id (the first went to the answer it gave up on).
        assert 5_000_000 <= state.producer_id < 5_000_010
    finally:
        assert broker.stop() == 0
    assert path.read_bytes() == b"5000000\n"  # imported once, left in place


@pytest.mark.parametrize("name", ["broker.json", ".lock"])
def test_a_garbage_broker_json_or_lock_file_does_not_stop_the_start(data_dir: Path,
                                                                     name: str) -> None:
    """broker.json is only written (the listener's address, for launchers), the lock only
    flocked: neither is read, so garbage left in either is harmless."""
    (data_dir / name).write_bytes(b"\x00\xff{garbage")
    broker = BrokerProcess(data_dir, data_dir.parent / "broker.log")
    try:
        line = loaded_line(start_logged(broker, name))  # waits for a broker.json of its pid
        assert "Loaded 2 partitions" in line and "(clean shutdown)" in line
        info = json.loads((data_dir / "broker.json").read_text())
        assert (info["pid"], info["port"]) == (broker.proc.pid, broker.port)  # type: ignore
    finally:
        assert broker.stop() == 0


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
