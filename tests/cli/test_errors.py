"""Every way a `spark-log` command can be used wrongly ends the same way: one `error:` line on
stderr, nothing on stdout, exit code 2 for bad flags and 1 for a failed command, never a
traceback. Driven through `main(argv)` in this process against the real broker process of
`broker_cli` (fast enough to try every command), plus one run as a separate process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_log.cli.main import main
from tests.cli.conftest import Cli, run_cli

TOPIC = "misused"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def spark_log(broker_cli: Cli, capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    """`spark_log(*argv)` -> (exit code, stdout, stderr), with --bootstrap-server of the
    broker process where the command takes one."""
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)  # main() sets it

    def run(*argv: str, address: bool = True) -> tuple[int, str, str]:
        extra = ["--bootstrap-server", broker_cli.bootstrap] if address else []
        try:
            code = main([*argv, *extra])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    yield run


@pytest.fixture(scope="module")
def misused(broker_cli: Cli) -> str:
    """A topic of one partition holding three records (offsets 0..2)."""
    broker_cli.ok("topics", "create", "--topic", TOPIC)
    broker_cli.ok("produce", "--topic", TOPIC, stdin="a\nb\nc\n")
    return TOPIC


CONNECTED = [
    # (argv, exit code, what the error line says)
    (("topics", "describe", "--topic", "nowhere"), 1, "topic 'nowhere' does not exist"),
    (("topics", "create", "--topic", "bad/name"), 1, "TOPIC_EXCEPTION"),
    (("topics", "create", "--topic", "x", "--partitions", "many"), 2,
     "argument --partitions: invalid int value: 'many'"),
    (("topics", "create", "--topic", "x", "--config", "nonsense.config=1"), 1,
     "INVALID_CONFIG"),
    (("topics", "alter", "--topic", TOPIC, "--config", "retention.ms=soon"), 1,
     "INVALID_CONFIG"),
    (("topics", "alter", "--topic", "__consumer_offsets", "--partitions", "60"), 1,
     "the number of partitions of __consumer_offsets cannot be changed"),
    (("produce", "--topic", TOPIC, "--producer-property", "no.such.setting=1"), 2,
     "producer settings: No such configuration property"),
    (("produce", "--topic", TOPIC, "--request-required-acks", "5"), 2,
     "argument --request-required-acks: invalid choice: '5'"),
    (("produce", "--topic", TOPIC, "--file", "/nonexistent/lines.txt"), 2,
     "--file /nonexistent/lines.txt: No such file or directory"),
    (("consume", "--topic", TOPIC, "--partition", "0", "--offset", "99"), 1,
     f"--offset 99: {TOPIC}-0 holds offsets 0 to 3 (log start to log end)"),
    (("consume", "--topic", TOPIC, "--partition", "0", "--offset", "-1"), 2,
     "--offset: expected a non-negative number, earliest or latest, got '-1'"),
    (("consume", "--topic", TOPIC, "--timeout-ms", "-5"), 2, "--timeout-ms must not be negative"),
    (("consume", "--topic", TOPIC, "--from-timestamp", "last tuesday"), 2,
     "--from-timestamp: expected epoch milliseconds or an ISO 8601 time"),
    (("consume", "--topic", TOPIC, "--consumer-property", "fetch.max.bytes=lots"), 2,
     "consumer settings: Invalid value for configuration property \"fetch.max.bytes\""),
    (("groups", "describe", "--group", "nobody"), 1, "consumer group 'nobody' does not exist"),
    (("groups", "delete", "--group", "nobody"), 1, "GROUP_ID_NOT_FOUND"),
    (("groups", "reset-offsets", "--group", "nobody", "--topic", TOPIC, "--to-earliest"), 1,
     "consumer group 'nobody' does not exist"),
    (("perf", "produce", "--topic", TOPIC, "--num-records", "0"), 2,
     "--num-records must be at least 1, got 0"),
    (("perf", "produce", "--topic", TOPIC, "--num-records", "1", "--record-size", "-1"), 2,
     "--record-size must be at least 0, got -1"),
    (("perf", "produce", "--topic", TOPIC, "--num-records", "1", "--producer-props", "acks"),
     2, "--producer-props expects KEY=VALUE, got 'acks'"),
    (("perf", "consume", "--topic", TOPIC, "--messages", "0"), 2,
     "--messages must be at least 1, got 0"),
    (("perf", "consume", "--topic", "nowhere", "--messages", "1"), 1,
     "topic 'nowhere' does not exist"),
]


def assert_one_error_line(result: tuple[int, str, str], code: int, message: str) -> None:
    got, out, err = result
    assert (got, out) == (code, ""), err
    [line] = err.splitlines()
    assert line.startswith("error: ") and message in line, line


@pytest.mark.parametrize(("argv", "code", "message"), CONNECTED,
                         ids=[" ".join(c[0]) for c in CONNECTED])
def test_a_misused_command_is_one_error_line(spark_log: Run, misused: str,
                                             argv: tuple[str, ...], code: int,
                                             message: str) -> None:
    assert_one_error_line(spark_log(*argv), code, message)


def test_an_unreachable_or_malformed_address(spark_log: Run) -> None:
    for address, code, message in (
            ("127.0.0.1:1", 1, "cannot reach a broker at 127.0.0.1:1 ("),
            ("127.0.0.1:99999", 2, "expected HOST:PORT (port 1-65535)"),
            ("just-a-host", 2, "expected HOST:PORT")):
        result = spark_log("topics", "list", "--bootstrap-server", address, address=False)
        assert_one_error_line(result, code, message)


def test_dump_log_of_a_directory_or_a_missing_file(spark_log: Run, tmp_path: Path) -> None:
    assert_one_error_line(spark_log("dump-log", "--files", str(tmp_path), address=False), 1,
                          f"{tmp_path}: a directory; name its segment files")
    missing = tmp_path / "gone.log"
    assert_one_error_line(spark_log("dump-log", "--files", str(missing), address=False), 1,
                          f"{missing}: no such file")


def test_a_sidecar_that_cannot_start(spark_log: Run, tmp_path: Path) -> None:
    """Without --bootstrap-server: a data directory that is a file, and one whose broker exits
    at start (a meta.properties it cannot read): its last log line is the reason."""
    plain_file = tmp_path / "not-a-dir"
    plain_file.write_text("")
    for argv in (("topics", "list"), ("sidecar", "status"), ("sidecar", "stop")):
        assert_one_error_line(spark_log(*argv, "--data-dir", str(plain_file), address=False), 1,
                              f"data directory {plain_file}: Not a directory")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "meta.properties").write_text("version=1\nnode.id=not-a-number\n")
    for argv in (("sidecar", "start"), ("topics", "list")):
        code, out, err = spark_log(*argv, "--data-dir", str(broken), address=False)
        assert_one_error_line((code, out, err), 1,
                              f"error: the sidecar broker for {broken} exited with ")
        assert err.rstrip().endswith(f"(its log: {broken / 'sidecar.log'})")


def test_no_command_or_an_unknown_one(spark_log: Run) -> None:
    assert_one_error_line(spark_log("topics", "frobnicate", address=False), 2,
                          "invalid choice: 'frobnicate'")
    assert_one_error_line(spark_log(address=False), 2,
                          "the following arguments are required: COMMAND (see `spark-log "
                          "--help`)")


def test_a_separate_process_prints_the_same_single_line(broker_cli: Cli) -> None:
    done = run_cli("consume", "--topic", "nowhere", "--bootstrap-server", broker_cli.bootstrap,
                   env={**os.environ})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        "error: topic 'nowhere' does not exist (create it with `spark-log topics create "
        "--topic nowhere`)"]
