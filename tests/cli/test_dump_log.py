"""`spark-log dump-log` on the files of real partitions (written by a broker process and by the
sidecar): every batch of a segment with its header fields, records with --print-data-log, a
transaction's control batch, index and time index entries verified against the log, the
transaction index, the records of __consumer_offsets and __transaction_state decoded; damaged
files and a bad index (torn, out of order, below its base offset) are reported with exit code
1."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.producer_state import producer_snapshot
from spark_log.storage.producer_state.producer_state_entry import BatchMetadata, ProducerStateEntry
from tests.cli.conftest import Cli, run_cli

TOPIC = "segments"
FIRST = "00000000000000000000"


def fields(line: str) -> dict[str, str]:
    """`key: value key: value ...` (values without spaces) as a dict."""
    words = line.lstrip("| ").split(" ")
    return dict(zip((w.rstrip(":") for w in words[::2]), words[1::2], strict=True))


def write_partition(cli: Cli) -> Path:
    """Three plain batches and an aborted transaction (data batch + ABORT marker)."""
    cli.ok("topics", "create", "--topic", TOPIC, "--config", "index.interval.bytes=1")
    address = cli.address()
    producer = Producer({"bootstrap.servers": address})
    for i in range(3):
        producer.produce(TOPIC, f"value-{i}".encode(), key=f"key-{i}".encode(),
                         headers=[("h", b"1")])
        assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": address, "transactional.id": "dumped"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(TOPIC, b"aborted")
    assert txn.flush(30) == 0
    txn.abort_transaction(30)
    return cli.data_dir / f"{TOPIC}-0"


def test_dump_segment_indexes_and_transaction_index(cli: Cli) -> None:
    partition = write_partition(cli)
    log = partition / f"{FIRST}.log"
    done = run_cli("dump-log", "--files", str(log), "--print-data-log")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [fields(line) for line in lines if line.startswith("baseOffset:")]
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        ("0", "0", "1"), ("1", "1", "1"), ("2", "2", "1"), ("3", "3", "1"), ("4", "4", "1")]
    assert [(b["isTransactional"], b["isControl"]) for b in batches] == [
        ("false", "false")] * 3 + [("true", "false"), ("true", "true")]
    assert all(b["isvalid"] == "true" and b["magic"] == "2" for b in batches)
    assert [int(b["position"]) for b in batches] == sorted(int(b["position"]) for b in batches)
    assert batches[3]["producerId"] == batches[4]["producerId"] != "-1"
    records = [fields(line) for line in lines if line.startswith("| ")]
    assert [(r["offset"], r.get("key"), r.get("payload")) for r in records[:4]] == [
        ("0", "key-0", "value-0"), ("1", "key-1", "value-1"), ("2", "key-2", "value-2"),
        ("3", None, "aborted")]
    assert records[0]["headerKeys"] == "[h]"
    assert (records[4]["endTxnMarker"], records[4]["offset"]) == ("ABORT", "4")

    index = run_cli("dump-log", "--files", f"{partition / FIRST}.index,"
                                         f"{partition / FIRST}.timeindex")
    entries = [fields(line) for line in index.stdout.splitlines() if line.startswith(
        ("offset:", "timestamp:"))]
    offsets = [e["offset"] for e in entries if "position" in e]
    assert offsets == ["1", "2", "3", "4"]
    positions = {b["baseOffset"]: b["position"] for b in batches}
    assert all(e["position"] == positions[e["offset"]] for e in entries if "position" in e)
    verified = run_cli("dump-log", "--verify-index-only", "--files",
                       f"{partition / FIRST}.index", "--files", f"{partition / FIRST}.timeindex")
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.count("passed the verification") == 2

    [aborted] = json.loads(run_cli("dump-log", "--json", "--files",
                                   f"{partition / FIRST}.txnindex").stdout)["entries"]
    assert (aborted["first_offset"], aborted["last_offset"]) == (3, 4)


def test_dump_json_damaged_files_and_bad_index(broker_cli: Cli, tmp_path: Path) -> None:
    source = broker_cli.data_dir / f"{TOPIC}-0" / f"{FIRST}.log"
    if not source.exists():
        write_partition(broker_cli)
    data = bytearray(source.read_bytes())
    batches = [json.loads(line) for line in run_cli(
        "dump-log", "--json", "--print-data-log", "--files", str(source)).stdout.splitlines()]
    assert batches[0]["records"][0]["payload"] == "value-0"
    assert batches[4]["records"][0]["end_txn_marker"] == "ABORT"
    deep = run_cli("dump-log", "--deep-iteration", "--files", str(source)).stdout
    records = [fields(line) for line in deep.splitlines() if line.startswith("| ")]
    assert [r["offset"] for r in records] == ["0", "1", "2", "3", "4"]
    assert records[0]["keySize"] == "5" and not any("payload" in r for r in records)

    flipped = tmp_path / f"{FIRST}.log"
    data[batches[0]["size"] - 1] ^= 0xFF  # the first batch's last byte: its CRC breaks
    flipped.write_bytes(data)
    done = run_cli("dump-log", "--files", str(flipped))
    assert done.returncode == 1
    assert [fields(line)["isvalid"] for line in done.stdout.splitlines()
            if line.startswith("baseOffset")] == ["false"] + ["true"] * 4

    torn = tmp_path / "torn" / f"{FIRST}.log"
    torn.parent.mkdir()
    torn.write_bytes(source.read_bytes()[:-5])
    done = run_cli("dump-log", "--files", str(torn))
    assert done.returncode == 1 and "Found a damaged batch" in done.stdout

    shutil.copy(source, tmp_path / "torn" / f"{FIRST}.log")
    bad_index = tmp_path / "torn" / f"{FIRST}.index"
    bad_index.write_bytes(struct.pack(">ii", 2, 0))  # offset 2 is not at position 0
    done = run_cli("dump-log", "--verify-index-only", "--files", str(bad_index))
    assert done.returncode == 1 and "Index offset: 2, log offset: 0" in done.stdout

    torn_time = tmp_path / "torn" / f"{FIRST}.timeindex"
    torn_time.write_bytes(struct.pack(">qi", 1000, 0) + b"\x01")
    done = run_cli("dump-log", "--files", str(torn_time))
    assert done.returncode == 1 and "1 byte(s) at the end are not a whole 12-byte entry" in \
        done.stdout
    bad_txn = tmp_path / "torn" / f"{FIRST}.txnindex"
    bad_txn.write_bytes(struct.pack(">hqqqq", 0, 7, 1, 2, 3) + struct.pack(">hqqqq", 9, 0, 0,
                                                                           0, 0))
    done = run_cli("dump-log", "--json", "--files", str(bad_txn))
    dumped = json.loads(done.stdout)
    assert (done.returncode, done.stderr) == (1, "")
    assert [e["producer_id"] for e in dumped["entries"]] == [7]
    assert dumped["problems"] == [f"{bad_txn}: entry of unknown version 9; ignoring the rest"]
    nothing = run_cli("dump-log", "--files", ",")
    assert nothing.returncode == 2 and "--files names no file" in nothing.stderr
    missing = run_cli("dump-log", "--files", str(tmp_path / "torn" / "gone.log"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    folder = run_cli("dump-log", "--files", str(tmp_path / "torn"))
    assert folder.returncode == 1 and "a directory; name its segment files" in folder.stderr
    notes = tmp_path / "notes.txt"
    notes.write_text("not a segment")
    unknown = run_cli("dump-log", "--files", str(notes))
    assert unknown.returncode == 1 and "Ignoring unknown file" in unknown.stderr


def test_index_checks_report_order_and_base_offset(broker_cli: Cli, tmp_path: Path) -> None:
    source = broker_cli.data_dir / f"{TOPIC}-0" / f"{FIRST}.log"
    if not source.exists():
        write_partition(broker_cli)
    base = "00000000000000000010"
    shutil.copy(source, tmp_path / f"{base}.log")
    index = tmp_path / f"{base}.index"
    index.write_bytes(b"".join(struct.pack(">ii", rel, pos)
                               for rel, pos in ((-3, 0), (2, 100), (1, 200))))
    times = tmp_path / f"{base}.timeindex"
    times.write_bytes(struct.pack(">qi", 1000, 5) + struct.pack(">qi", 2000, 2))
    sane = run_cli("dump-log", "--index-sanity-check", "--files", f"{index},{times}")
    assert sane.returncode == 1
    assert "Index offset: 7 is below the base offset 10" in sane.stdout
    assert "Out of order offset: 12 then 11" in sane.stdout
    assert "Out of order offset: 15 then 12" in sane.stdout
    verified = run_cli("dump-log", "--verify-index-only", "--files", str(index))
    assert verified.returncode == 1 and "Out of order offset: 12 then 11" in verified.stdout
    assert "no batch starts there" not in verified.stdout  # entries out of order: not matched


def internal_segments(cli: Cli, topic: str) -> str:
    return ",".join(str(p / f"{FIRST}.log") for p in sorted(cli.data_dir.glob(f"{topic}-*")))


def test_dump_internal_topics_with_their_decoders(broker_cli: Cli) -> None:
    if not (broker_cli.data_dir / f"{TOPIC}-0" / f"{FIRST}.log").exists():
        write_partition(broker_cli)  # its transactional producer "dumped" aborted once
    committer = Consumer({"bootstrap.servers": broker_cli.bootstrap, "group.id": "dumped-group"})
    committer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    committer.close()

    done = run_cli("dump-log", "--offsets-decoder", "--files",
                   internal_segments(broker_cli, "__consumer_offsets"))
    assert done.returncode == 0, done.stderr
    commits = [line for line in done.stdout.splitlines()
               if '"group":"dumped-group","topic":"segments"' in line]
    assert commits, done.stdout[-2000:]
    key, payload = commits[-1].split(" key: ", 1)[1].split(" payload: ")
    assert json.loads(key) == {"type": 1, "data": {"group": "dumped-group", "topic": TOPIC,
                                                   "partition": 0}}
    assert json.loads(payload)["data"]["offset"] == 2

    done = run_cli("dump-log", "--json", "--transaction-log-decoder", "--files",
                   internal_segments(broker_cli, "__transaction_state"))
    assert done.returncode == 0, done.stderr
    states = [r["payload"]["data"] for batch in map(json.loads, done.stdout.splitlines())
              for r in batch["records"]
              if r["key"]["data"] == {"transactional_id": "dumped"}]
    assert [s["state"] for s in states][-3:] == ["Ongoing", "PrepareAbort", "CompleteAbort"]
    assert states[-3]["partitions"] == {TOPIC: [0]}


def test_dump_producer_snapshot(tmp_path: Path) -> None:
    entry = ProducerStateEntry(7, 2, coordinator_epoch=0, last_timestamp=1000,
                               current_txn_first_offset=-1)
    entry.batches.append(BatchMetadata(4, 12, 0, 1000))
    producer_snapshot.write(str(tmp_path), 13, [entry], DEFAULT_FS)
    path = tmp_path / producer_snapshot.snapshot_file_name(13)
    done = run_cli("dump-log", "--files", str(path))
    assert done.returncode == 0
    [line] = [line for line in done.stdout.splitlines() if line.startswith("producerId")]
    assert fields(line) == {"producerId": "7", "producerEpoch": "2", "coordinatorEpoch": "0",
                            "currentTxnFirstOffset": "-1", "lastTimestamp": "1000",
                            "lastSequence": "4", "lastOffset": "12", "offsetDelta": "0"}
    path.write_bytes(path.read_bytes()[:-3])
    assert run_cli("dump-log", "--files", str(path)).returncode == 1
