"""`spark-log dump-log --verify --data-dir DIR` on a data directory written by a real broker
(plain, compacted and transactional topics, a consumer group's commits) and stopped cleanly: no
problem. Each kind of damage, done by hand to a copy, is reported on a line naming its file
(and the byte and offsets for a segment) with exit code 1; leftovers of interrupted operations
are notes (exit code 0); a running broker is named and keeps working; a killed broker's
leader epochs past its recovery points (its next start recovers them) are no problem; an empty
or missing directory, zero-length files, a directory or FIFO where a file should be and a
broker.json that is not one are reported without a traceback; and verifying changes no file."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.records import BatchHeader, iter_headers, set_base_offset
from tests.broker.txn_support import wait_until
from tests.broker_process import BrokerProcess
from tests.cli.conftest import run_cli
from tests.legacy_data_dir import as_before_the_metadata_log

SMALL_SEGMENTS = {"internal.segment.bytes": "2000", "index.interval.bytes": "100"}
MANY = 30  # batches in the one segment of topic "many"


def verify(data: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_cli("dump-log", "--verify", "--data-dir", str(data), *flags)


def _fill(broker: BrokerProcess) -> None:
    """Small segments of a plain topic, a compacted topic the cleaner has cleaned, an aborted
    and two committed transactions, a consumer group's commit, and MANY batches in one
    segment."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    compacted = {**SMALL_SEGMENTS, "cleanup.policy": "compact", "segment.ms": "100",
                 "min.cleanable.dirty.ratio": "0.01"}
    topics = [NewTopic("plain", 2, 1, config=SMALL_SEGMENTS),
              NewTopic("compacted", 1, 1, config=compacted),
              NewTopic("txn", 1, 1), NewTopic("many", 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce("plain", f"value-{i}".encode() * 8, key=f"k{i}".encode(),
                         partition=i % 2)
        producer.produce("compacted", f"value-{i}".encode() * 8, key=f"k{i % 5}".encode())
        if i < MANY:
            producer.produce("many", f"value-{i}".encode())
        assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "verified"})
    txn.init_transactions(30)
    for commit in (True, False, True):
        txn.begin_transaction()
        txn.produce("txn", b"in a transaction")
        assert txn.flush(30) == 0
        (txn.commit_transaction if commit else txn.abort_transaction)(30)
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verified-group"})
    group.commit(offsets=[TopicPartition("plain", 0, 5)], asynchronous=False)
    group.close()
    cleaner = broker.data_dir / "cleaner-offset-checkpoint"
    wait_until(lambda: cleaner.exists() and "compacted 0" in cleaner.read_text(),
               what="the cleaner to clean the compacted topic")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of a broker that wrote every kind of file, stopped cleanly."""
    tmp = tmp_path_factory.mktemp("verify-source")
    broker = BrokerProcess(tmp / "data", tmp / "broker.log", {"log.cleaner.backoff.ms": "50"})
    broker.start()
    try:
        _fill(broker)
    finally:
        assert broker.stop() == 0, broker.log()
    return broker.data_dir


@pytest.fixture
def data(source: Path, tmp_path: Path) -> Path:
    """A copy of `source` to damage."""
    return Path(shutil.copytree(source, tmp_path / "data", symlinks=True)).resolve()


def segments(partition: Path) -> list[Path]:
    return sorted(partition.glob("[0-9]" * 20 + ".log"))


def batches(log: Path) -> list[tuple[int, BatchHeader]]:
    return list(iter_headers(log.read_bytes()))


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(data)


def replace_line(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new, 1))


# ---- the undamaged directory --------------------------------------------------------------

def test_a_cleanly_stopped_directory_has_no_problem(source: Path) -> None:
    kinds = {p.suffix for p in source.rglob("*") if p.is_file()}
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot"} <= kinds
    assert (source / "__consumer_offsets-0").is_dir() and (source / "__cluster_metadata-0").is_dir()
    assert list(source.glob("*/leader-epoch-checkpoint"))
    done = verify(source)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    [summary] = done.stdout.splitlines()
    counts = re.fullmatch(r"Verified .*: (\d+) partition\(s\), (\d+) segment\(s\), (\d+) "
                          r"batch\(es\); no problems, 0 note\(s\)\.", summary)
    assert counts, summary
    partitions, segment_count, batch_count = map(int, counts.groups())
    dirs = [p for p in source.iterdir() if p.is_dir()]
    assert partitions == len(dirs) and segment_count == len(list(source.glob("*/*.log")))
    assert batch_count >= 60 + MANY  # plain and many; compaction removed some of the rest
    report = json.loads(verify(source, "--json").stdout)
    assert (report["problem_count"], report["problems"], report["broker_running"]) == (
        0, [], False)


# ---- one kind of damage at a time ----------------------------------------------------------

Damage = Callable[[Path], tuple[Path, list[str]]]


def garbage_tail(data: Path) -> tuple[Path, list[str]]:
    log = segments(data / "plain-0")[-1]
    size, end = log.stat().st_size, batches(log)[-1][1].next_offset
    garbage = b"\x07" + bytes(range(256)) + b"garbage" * 6
    with open(log, "ab") as f:
        f.write(garbage)
    return log, [f"torn or garbage tail at byte {size}: {len(garbage)} bytes",
                 f"offsets from {end} on"]


def zeroed_tail(data: Path) -> tuple[Path, list[str]]:
    log = segments(data / "plain-1")[-1]
    size, end = log.stat().st_size, batches(log)[-1][1].next_offset
    with open(log, "ab") as f:
        f.write(bytes(4096))
    return log, [f"torn or garbage tail at byte {size}: 4096 bytes", f"offsets from {end} on"]


def torn_batch(data: Path) -> tuple[Path, list[str]]:
    log = segments(data / "plain-0")[-1]
    position, last = batches(log)[-1]
    os.truncate(log, position + last.size - 5)
    return log, [f"torn or garbage tail at byte {position}: {last.size - 5} bytes",
                 f"offsets from {last.base_offset} on"]


def crc_flip_in_the_middle(data: Path) -> tuple[Path, list[str]]:
    log = segments(data / "plain-0")[0]
    found = batches(log)
    position, middle = found[len(found) // 2]
    flip(log, position + middle.size - 1)
    return log, [f"batch at byte {position} (offsets {middle.base_offset} to "
                 f"{middle.last_offset}): CRC mismatch"]


def first_batch_below_base_offset(data: Path) -> tuple[Path, list[str]]:
    log = segments(data / "plain-0")[1]
    base = int(log.name[:20])
    raw = bytearray(log.read_bytes())
    set_base_offset(raw, 0, base - 5)  # not covered by the CRC
    log.write_bytes(raw)
    return log, [f"batch at byte 0 (offsets {base - 5} to",
                 f"below the segment's base offset {base}"]


def torn_index(data: Path) -> tuple[Path, list[str]]:
    index = segments(data / "plain-0")[0].with_suffix(".index")
    with open(index, "ab") as f:
        f.write(b"\x00\x01\x02")
    return index, ["3 byte(s) at the end are not a whole 8-byte entry"]


def garbage_index_entry(data: Path) -> tuple[Path, list[str]]:
    index = segments(data / "plain-0")[0].with_suffix(".index")
    raw = bytearray(index.read_bytes())
    relative, position = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">ii", raw, 8, relative, position + 1)
    index.write_bytes(raw)
    return index, [f"Index offset: {relative}, position {position + 1}: no batch starts there"]


def time_index(data: Path) -> tuple[Path, list[str]]:
    path = segments(data / "plain-0")[0].with_suffix(".timeindex")
    raw = bytearray(path.read_bytes())
    last = len(raw) - 12
    timestamp, relative = struct.unpack_from(">qi", raw, last)
    struct.pack_into(">qi", raw, last, timestamp + 1, relative)
    path.write_bytes(raw)
    return path, [f"Index timestamp: {timestamp + 1}, log timestamp: {timestamp}"]


def torn_txn_index(data: Path) -> tuple[Path, list[str]]:
    [path] = (data / "txn-0").glob("*.txnindex")
    with open(path, "ab") as f:
        f.write(b"\x00\x00")
    return path, ["size 36 is not a multiple of 34"]


def txn_index_of_another_producer(data: Path) -> tuple[Path, list[str]]:
    [path] = (data / "txn-0").glob("*.txnindex")
    version, producer, first, last, lso = struct.unpack(">hqqqq", path.read_bytes())
    path.write_bytes(struct.pack(">hqqqq", version, producer + 7, first, last, lso))
    return path, [f"entry of producer {producer + 7}: offset {last} is not its ABORT marker"]


def damaged_snapshot(data: Path) -> tuple[Path, list[str]]:
    path = sorted((data / "txn-0").glob("*.snapshot"))[-1]
    flip(path, path.stat().st_size - 1)
    return path, ["damaged producer snapshot: CRC mismatch"]


def recovery_point_past_the_log(data: Path) -> tuple[Path, list[str]]:
    path = data / "recovery-point-offset-checkpoint"
    end = batches(segments(data / "plain-0")[-1])[-1][1].next_offset
    replace_line(path, f"\nplain 0 {end}\n", f"\nplain 0 {end + 100}\n")
    return path, [f"plain-0: recovery point {end + 100} is past the log end offset {end}"]


def malformed_log_start_checkpoint(data: Path) -> tuple[Path, list[str]]:
    path = data / "log-start-offset-checkpoint"
    replace_line(path, "\nplain 0 0\n", "\nplain zero 0\n")
    return path, ["malformed line", "'plain zero 0'"]


def replication_checkpoint_count(data: Path) -> tuple[Path, list[str]]:
    path = data / "replication-offset-checkpoint"
    lines = path.read_text().split("\n")
    count = int(lines[1])
    path.write_text("\n".join([lines[0], str(count + 1), *lines[2:]]))
    return path, [f"expected {count + 1} entries but found {count}"]


def cleaner_checkpoint_not_text(data: Path) -> tuple[Path, list[str]]:
    path = data / "cleaner-offset-checkpoint"
    path.write_bytes(b"0\n1\ncompacted 0 \xff\xfe\n")
    return path, ["not text"]


def leader_epoch_checkpoint(data: Path) -> tuple[Path, list[str]]:
    path = data / "plain-0" / "leader-epoch-checkpoint"
    epoch = batches(segments(data / "plain-0")[0])[0][1].partition_leader_epoch
    path.write_text(f"0\n1\n{epoch} 5\n")
    return path, [f"the batches of leader epoch {epoch} start at offset 0, but the checkpoint "
                  "gives that offset no epoch"]


def torn_leader_epoch_checkpoint(data: Path) -> tuple[Path, list[str]]:
    path = data / "plain-1" / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n")
    return path, ["expected 2 entries but found 1"]


def meta_properties(data: Path) -> tuple[Path, list[str]]:
    path = data / "meta.properties"
    path.write_text("\n".join(line for line in path.read_text().splitlines()
                              if not line.startswith("node.id")))
    return path, ["no node.id"]


def topics_json(data: Path) -> tuple[Path, list[str]]:
    as_before_the_metadata_log(data)
    path = data / "topics.json"
    doc = json.loads(path.read_text())
    [plain] = [t for t in doc["topics"] if t["name"] == "plain"]
    plain["partitions"] = 1
    path.write_text(json.dumps(doc))
    return path, ["topic plain has 1 partition(s), but directories of its partition(s) 1 exist"]


def topics_json_not_json(data: Path) -> tuple[Path, list[str]]:
    as_before_the_metadata_log(data)
    path = data / "topics.json"
    path.write_text('{"version": 1, "topics": [')
    return path, ["not JSON"]


def foreign_partition_dir(data: Path) -> tuple[Path, list[str]]:
    path = data / "plain backup"
    path.mkdir()
    return path, ["not a partition directory (<topic>-<partition>)"]


def malformed_partition_dir(data: Path) -> tuple[Path, list[str]]:
    path = data / "plain-01"
    shutil.copytree(data / "plain-1", path)
    return path, ["not the name of partition 1 of topic plain (plain-1)"]


def producer_id_block(data: Path) -> tuple[Path, list[str]]:
    as_before_the_metadata_log(data)
    path = data / "producer-id-block"
    path.write_text("0\n")
    return path, ["block end 0 is not above producer id"]


DAMAGES: list[Damage] = [
    garbage_tail, zeroed_tail, torn_batch, crc_flip_in_the_middle, first_batch_below_base_offset,
    torn_index, garbage_index_entry, time_index, torn_txn_index, txn_index_of_another_producer,
    damaged_snapshot, recovery_point_past_the_log, malformed_log_start_checkpoint,
    replication_checkpoint_count, cleaner_checkpoint_not_text, leader_epoch_checkpoint,
    torn_leader_epoch_checkpoint, meta_properties, topics_json, topics_json_not_json,
    foreign_partition_dir, malformed_partition_dir, producer_id_block]


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.__name__ for d in DAMAGES])
def test_each_damage_is_a_problem_naming_its_file(data: Path, damage: Damage) -> None:
    path, expected = damage(data)
    done = verify(data)
    assert (done.returncode, done.stderr) == (1, ""), done.stdout
    lines = [line for line in done.stdout.splitlines()
             if line.startswith(f"{path}: ") and not line.startswith(f"{path}: note:")]
    assert any(all(e in line for e in expected) for line in lines), done.stdout
    assert re.search(r"; [1-9]\d* problem\(s\), \d+ note\(s\)\.$", done.stdout), done.stdout


def test_json_lists_the_problems_with_their_files(data: Path) -> None:
    log, [tail, _] = garbage_tail(data)
    snapshot, [damaged] = damaged_snapshot(data)
    done = verify(data, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["problem_count"] == len(report["problems"]) == 2
    assert {p["path"] for p in report["problems"]} == {str(log), str(snapshot)}
    assert any(tail in p["problem"] for p in report["problems"])
    assert any(damaged in p["problem"] for p in report["problems"])


def test_problems_beyond_twenty_in_one_file_are_counted_not_listed(data: Path) -> None:
    [log] = segments(data / "many-0")
    found = batches(log)
    assert len(found) == MANY
    for position, header in found:
        flip(log, position + header.size - 1)
    done = verify(data)
    assert done.returncode == 1
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"{log}: ")]
    assert sum("CRC mismatch" in line for line in lines) == 20
    assert f"{log}: {MANY - 20} more problem(s) not listed" in lines
    assert json.loads(verify(data, "--json").stdout)["problem_count"] == MANY


# ---- notes, a running broker, odd directories -----------------------------------------------

def test_leftovers_of_interrupted_operations_are_notes(data: Path) -> None:
    first = segments(data / "plain-0")[0]
    leftovers = [first.with_name(first.name + ".deleted"),
                 first.with_name(first.name + ".swap"),
                 first.with_name(first.name + ".cleaned"),
                 data / "plain-0" / "00000000000000000020.snapshot.tmp",
                 data / "topics.json.tmp"]
    for path in leftovers:
        path.write_bytes(b"left over")
    deleted = data / "plain-1.0123456789abcdef0123456789abcdef-delete"
    deleted.mkdir()
    done = verify(data)
    assert done.returncode == 0, done.stdout
    for path in [*leftovers, deleted]:
        assert any(line.startswith(f"{path}: note: ") for line in done.stdout.splitlines()), \
            (path, done.stdout)
    assert done.stdout.splitlines()[-1].endswith(f"no problems, {len(leftovers) + 1} note(s).")


def test_a_running_broker_is_named_and_keeps_working(data: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(data, tmp_path / "broker.log").start()
    try:
        done = verify(data, "--json")
        assert done.returncode == 0, done.stdout
        report = json.loads(done.stdout)
        assert report["broker_running"] is True
        assert any(f"a broker (pid {broker.proc.pid}) is running" in n["note"]  # type: ignore
                   and "torn tail" in n["note"] for n in report["notes"])
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("plain", b"after the verification", partition=0)
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0, broker.log()


def test_epochs_the_next_start_recovers_are_no_problem(data: Path, tmp_path: Path) -> None:
    # The restarted broker leads at a new epoch; its batch is not flushed when it is killed, so
    # the checkpoint need not name that epoch yet: the next start recovers it from the batch.
    broker = BrokerProcess(data, tmp_path / "broker.log").start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("many", b"at the new epoch")
        assert producer.flush(30) == 0
    finally:
        broker.kill()
    [(_, last)] = batches(segments(data / "many-0")[-1])[-1:]
    checkpoint = (data / "many-0" / "leader-epoch-checkpoint").read_text().split("\n")[2:]
    assert last.base_offset == MANY and f"{last.partition_leader_epoch} {MANY}" not in checkpoint
    done = verify(data)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines()[-1].endswith("no problems, 1 note(s)."), done.stdout
    assert "no clean-shutdown marker" in done.stdout


def test_a_write_cut_short_past_the_recovery_point_is_a_note(data: Path, tmp_path: Path) -> None:
    # SIGKILL can stop a write between two pages (the kernel ends a write for a fatal signal),
    # leaving part of an unflushed batch: the next start's recovery cuts it. Below the recovery
    # point (flushed data) the same bytes are a problem.
    broker = BrokerProcess(data, tmp_path / "broker.log").start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("many", b"x" * 5000)  # a batch across a page boundary
        assert producer.flush(30) == 0
    finally:
        broker.kill()
    log = segments(data / "many-0")[-1]
    position, last = batches(log)[-1]
    assert last.base_offset == MANY
    os.truncate(log, position + 4096 - position % 4096)  # the first page of it written
    done = verify(data)
    assert done.returncode == 0, done.stdout
    assert "no problems, 2 note(s)." in done.stdout, done.stdout
    assert f"offsets from {MANY} on are not in this segment: an unflushed write cut short, " \
           f"past the recovery point {MANY}" in done.stdout, done.stdout
    replace_line(data / "recovery-point-offset-checkpoint", f"\nmany 0 {MANY}\n",
                 f"\nmany 0 {MANY + 1}\n")
    done = verify(data)
    assert done.returncode == 1 and "torn or garbage tail" in done.stdout, done.stdout
    assert "an unflushed write cut short" not in done.stdout


def test_empty_missing_zero_filled_and_odd_files(data: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = verify(empty)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"Verified {empty.resolve()}: 0 partition(s), 0 segment(s), "
                           "0 batch(es); no problems, 0 note(s).\n")
    missing = verify(tmp_path / "nowhere")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == f"error: {(tmp_path / 'nowhere').resolve()}: no such directory\n"
    as_before_the_metadata_log(data)
    for path in [*(data / "txn-0").iterdir(), *(p for p in data.iterdir() if p.is_file())]:
        os.truncate(path, 0)
    index = segments(data / "plain-0")[0].with_suffix(".index")
    index.unlink()
    index.mkdir()
    snapshot = sorted((data / "plain-1").glob("*.snapshot"))[-1]
    snapshot.unlink()
    os.mkfifo(snapshot)  # opening it to read would wait for a writer
    (data / "broker.json").write_text('{"pid": "not a pid"}')
    done = verify(data)
    assert (done.returncode, done.stderr) == (1, ""), done.stderr
    lines = done.stdout.splitlines()
    for odd in (index, snapshot):
        assert f"{odd}: not a regular file: the broker cannot use it" in lines
    assert f"{data / 'txn-0' / '00000000000000000006.snapshot'}: damaged producer snapshot: " \
           "0 bytes is too short for a snapshot" in lines
    for name in ("meta.properties", "topics.json", "recovery-point-offset-checkpoint",
                 "producer-id-block"):
        assert any(line.startswith(f"{data / name}: ") for line in lines), (name, lines)


def test_verify_refuses_the_dump_flags(data: Path) -> None:
    log = segments(data / "plain-0")[0]
    both = run_cli("dump-log", "--verify", "--data-dir", str(data), "--files", str(log))
    assert both.returncode == 2 and "--files cannot go with --verify" in both.stderr
    alone = run_cli("dump-log", "--data-dir", str(data))
    assert alone.returncode == 2 and "--data-dir goes with --verify" in alone.stderr
    nothing = run_cli("dump-log")
    assert nothing.returncode == 2 and "give the files to dump" in nothing.stderr


# ---- read-only ------------------------------------------------------------------------------

def fingerprint(root: Path) -> dict[str, tuple[object, ...]]:
    """Every file and directory under `root`: its stat (size, times, inode, mode) and, for a
    file, a hash of its bytes."""
    out: dict[str, tuple[object, ...]] = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode,
                          digest)
    return out


def test_verification_changes_nothing(data: Path) -> None:
    for damage in (garbage_tail, crc_flip_in_the_middle, torn_index, torn_txn_index,
                   damaged_snapshot, torn_leader_epoch_checkpoint, malformed_log_start_checkpoint,
                   topics_json, foreign_partition_dir):
        damage(data)
    (segments(data / "compacted-0")[0].with_suffix(".log.cleaned")).write_bytes(b"x")
    before = fingerprint(data)
    assert verify(data).returncode == 1
    assert verify(data, "--json").returncode == 1
    assert fingerprint(data) == before
