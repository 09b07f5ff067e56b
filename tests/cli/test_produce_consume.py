"""`spark-log produce` and `spark-log consume`: keys, headers, partitions, compression, start
positions and output formats, against a real broker and the sidecar; error cases against the
broker."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.cli.conftest import CLI, TIMEOUT_S, Cli, table

PRINT_ALL = ["--property", "print.key=true", "--property", "print.headers=true",
             "--property", "print.partition=true", "--property", "print.offset=true"]


def test_produce_then_consume_from_every_kind_of_start(cli: Cli, tmp_path: Path) -> None:
    cli.ok("topics", "create", "--topic", "events", "--partitions", "2")
    summary = cli.json("produce", "--topic", "events", "--partition", "0",
                       "--property", "parse.key=true", "--property", "key.separator=:",
                       "-H", "src=cli", stdin="k1:v1\nk2:v2\nk3:v3\n")
    assert summary == {"topic": "events", "records": 3, "errors": 0, "partitions": {"0": 3}}
    between = time.time_ns() // 1_000_000
    lines = tmp_path / "lines.txt"
    lines.write_text("trace:abc,tenant:t1\tk4\tv4\n")
    out = cli.ok("produce", "--topic", "events", "--file", str(lines), "--partition", "1",
                 "--compression-codec", "gzip", "--property", "parse.key=true",
                 "--property", "parse.headers=true")
    assert out.strip() == "Produced 1 record(s) to events (by partition 1: 1)."

    done = cli.run("consume", "--topic", "events", "--from-beginning", "--max-messages", "4",
                   *PRINT_ALL)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "Partition:0\tOffset:0\tsrc:cli\tk1\tv1", "Partition:0\tOffset:1\tsrc:cli\tk2\tv2",
        "Partition:0\tOffset:2\tsrc:cli\tk3\tv3",
        "Partition:1\tOffset:0\ttrace:abc,tenant:t1\tk4\tv4"]
    assert "Processed a total of 4 messages" in done.stderr

    records = [json.loads(line) for line in cli.ok(
        "consume", "--topic", "events", "--partition", "0", "--offset", "1",
        "--max-messages", "2", "--json").splitlines()]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (1, "k2", "v2", [["src", "cli"]]), (2, "k3", "v3", [["src", "cli"]])]
    assert all(r["timestamp_type"] == "CreateTime" for r in records)

    iso = dt.datetime.fromtimestamp(between / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
    after = cli.ok("consume", "--topic", "events", "--from-timestamp", iso, "--timeout-ms",
                   "1500")
    assert after.splitlines() == ["v4"]


def test_consume_stops_after_timeout_without_records(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "quiet")
    started = time.monotonic()
    done = broker_cli.run("consume", "--topic", "quiet", "--timeout-ms", "500")
    assert done.returncode == 0 and done.stdout == ""
    assert "Processed a total of 0 messages" in done.stderr
    assert time.monotonic() - started < 30


def test_a_group_member_waits_for_its_partitions_before_timing_out(broker_cli: Cli) -> None:
    """Joining a new group takes the broker's initial rebalance delay (3 s): --timeout-ms
    counts from the assignment, so a shorter timeout still reads what is there."""
    broker_cli.ok("topics", "create", "--topic", "joined", "--partitions", "2")
    broker_cli.ok("produce", "--topic", "joined", stdin="a\nb\nc\n")
    done = broker_cli.run("consume", "--topic", "joined", "--group", "late-joiner",
                          "--from-beginning", "--timeout-ms", "2500")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["a", "b", "c"]
    assert "Processed a total of 3 messages" in done.stderr
    described = table(broker_cli.ok("groups", "describe", "--group", "late-joiner"))
    assert sum(int(r["CURRENT-OFFSET"]) for r in described) == 3


def test_bytes_that_are_not_utf8_are_produced_unchanged(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "raw-bytes")
    produce = [*CLI, "produce", "--topic", "raw-bytes", "--bootstrap-server",
               broker_cli.bootstrap, "--property", "parse.key=true", "--property",
               "key.separator=:"]
    done = subprocess.run(produce, input=b"k\xff:\xfe\x00v\r\nplain:text\n",
                          capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    consumer = Consumer({"bootstrap.servers": broker_cli.bootstrap, "group.id": "raw-bytes"})
    consumer.assign([TopicPartition("raw-bytes", 0, 0)])
    got: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.key(), msg.value()))
    consumer.close()
    assert got == [(b"k\xff", b"\xfe\x00v"), (b"plain", b"text")]

    bad_header = subprocess.run([*produce, "--property", "parse.headers=true"],
                                input=b"h\xff:1\tk:v\n", capture_output=True,
                                timeout=TIMEOUT_S, check=False)
    assert bad_header.returncode == 2
    assert bad_header.stderr.decode().splitlines() == [
        "error: header key on line 1 is not UTF-8: b'h\\xff'"]


def test_formatter_properties_and_null_marker(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "nulls")
    broker_cli.ok("produce", "--topic", "nulls", "--property", "parse.key=true",
                  "--property", "null.marker=NULL", stdin="NULL\tv1\nk2\tNULL\n")
    out = broker_cli.ok("consume", "--topic", "nulls", "--from-beginning", "--max-messages",
                        "2", "--property", "print.key=true", "--property", "key.separator= | ",
                        "--property", "null.literal=<none>", "--property", "print.timestamp=true")
    first, second = out.splitlines()
    assert first.startswith("CreateTime:") and first.endswith(" | <none> | v1")
    assert second.endswith(" | k2 | <none>")


def test_produce_and_consume_errors(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "strict", "--partitions", "2")
    cases = [
        (("produce", "--topic", "absent"), "", 1, "topic 'absent' does not exist"),
        (("consume", "--topic", "absent", "--timeout-ms", "100"), None, 1,
         "topic 'absent' does not exist"),
        (("consume", "--topic", "strict", "--offset", "5"), None, 2,
         "--offset N needs --partition"),
        (("consume", "--topic", "strict", "--offset", "1", "--from-beginning",
          "--partition", "0"), None, 2, "cannot be used together"),
        (("consume", "--topic", "strict", "--partition", "7"), None, 2,
         "has partitions 0..1"),
        (("produce", "--topic", "strict", "--property", "parse.key=true"), "no-separator\n", 2,
         "no key separator '\\t' on line 1"),
        (("produce", "--topic", "strict", "--property", "print.key=true"), "", 2,
         "--property print.key: unknown"),
        (("consume", "--topic", "strict", "--from-timestamp", "yesterday"), None, 2,
         "expected epoch milliseconds or an ISO 8601 time"),
    ]
    for args, stdin, code, message in cases:
        done = broker_cli.run(*args, stdin=stdin)
        assert (done.returncode, message in done.stderr) == (code, True), (args, done.stderr)
