"""`spark-log topics ...`: the whole life of a topic against a real broker and against the
sidecar; error cases and variants against the broker."""

from __future__ import annotations

from tests.cli.conftest import Cli, run_cli, table


def test_create_list_describe_alter_delete(cli: Cli) -> None:
    out = cli.ok("topics", "create", "--topic", "orders", "--partitions", "2",
                 "--config", "retention.ms=3600000")
    assert out.strip() == "Created topic orders."
    assert "orders" in cli.ok("topics", "list").split()
    cli.ok("produce", "--topic", "orders", "--partition", "1", stdin="a\nb\nc\n")

    text = cli.ok("topics", "describe", "--topic", "orders")
    header, rest = text.split("\n", 1)
    assert header.startswith("Topic: orders\tTopicId: ")
    assert "PartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in header
    rows = table(rest)
    assert [(r["PARTITION"], r["LEADER"], r["REPLICAS"], r["ISR"]) for r in rows] == [
        ("0", "0", "0", "0"), ("1", "0", "0", "0")]
    assert [(r["LOG-START-OFFSET"], r["LOG-END-OFFSET"]) for r in rows] == [("0", "0"),
                                                                           ("0", "3")]
    assert rows[0]["SIZE"] == "0" and int(rows[1]["SIZE"]) > 0

    out = cli.ok("topics", "alter", "--topic", "orders", "--partitions", "3",
                 "--config", "cleanup.policy=compact", "--delete-config", "retention.ms")
    assert "Topic orders now has 3 partitions (was 2)." in out
    [described] = cli.json("topics", "describe", "--topic", "orders")
    assert described["configs"] == {"cleanup.policy": "compact"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["partitions"][1]["log_end_offset"] == 3
    assert described["partitions"][1]["size_bytes"] > 0

    assert cli.ok("topics", "delete", "--topic", "orders").strip() == "Deleted topic orders."
    assert "orders" not in cli.ok("topics", "list").split()


def test_list_json_and_internal_topics(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "listed", "--partitions", "3")
    listed = {t["name"]: t for t in broker_cli.json("topics", "list")}
    assert listed["listed"] == {"name": "listed", "partitions": 3, "internal": False}
    names = broker_cli.ok("topics", "list", "--exclude-internal").split()
    assert "listed" in names and not any(n.startswith("__") for n in names)


def test_create_existing_topic_fails_unless_if_not_exists(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "twice")
    again = broker_cli.run("topics", "create", "--topic", "twice")
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and "'twice'" in again.stderr
    assert broker_cli.run("topics", "create", "--topic", "twice", "--if-not-exists").returncode == 0


def test_unknown_topic_is_an_error(broker_cli: Cli) -> None:
    for args in (("topics", "describe", "--topic", "nowhere"),
                 ("topics", "delete", "--topic", "nowhere"),
                 ("topics", "alter", "--topic", "nowhere", "--partitions", "4")):
        done = broker_cli.run(*args)
        assert done.returncode == 1, args
        assert done.stderr.startswith("error: topic 'nowhere' does not exist"), done.stderr
    assert broker_cli.run("topics", "delete", "--topic", "nowhere", "--if-exists").returncode == 0
    assert "nowhere" not in broker_cli.ok("topics", "list").split()


def test_bad_flags_exit_2(broker_cli: Cli) -> None:
    bad_config = broker_cli.run("topics", "create", "--topic", "x", "--config", "retention.ms")
    assert bad_config.returncode == 2
    assert "--config expects KEY=VALUE" in bad_config.stderr
    broker_cli.ok("topics", "create", "--topic", "shrink", "--partitions", "2")
    shrink = broker_cli.run("topics", "alter", "--topic", "shrink", "--partitions", "1")
    assert shrink.returncode == 2 and "partitions can only be added" in shrink.stderr
    nothing = broker_cli.run("topics", "alter", "--topic", "shrink")
    assert nothing.returncode == 2
    assert run_cli("topics", "frobnicate").returncode == 2


def test_unreachable_broker_names_the_address() -> None:
    done = run_cli("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert done.returncode == 1
    assert done.stderr.startswith("error: cannot reach a broker at 127.0.0.1:1 (")
    malformed = run_cli("topics", "list", "--bootstrap-server", "localhost")
    assert malformed.returncode == 2 and "expected HOST:PORT" in malformed.stderr
