"""`spark-log groups ...` against a real broker and the sidecar: after a group consumed part
of a topic, `describe` shows committed offsets, end offsets and lag per partition, and with a
live member its id, host, client id and assignment (kafka-consumer-groups --describe);
reset-offsets plans, refuses an active group, executes; delete removes the group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer

from tests.cli.conftest import Cli, table

TOPIC, GROUP = "clicks", "readers"


@contextmanager
def live_member(bootstrap: str) -> Iterator[Consumer]:
    """A member of GROUP that holds an assignment until the block ends."""
    assigned: list[object] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "client.id": "live-reader", "enable.auto.commit": False})
    consumer.subscribe([TOPIC], on_assign=lambda _c, parts: assigned.extend(parts))
    deadline = time.monotonic() + 60
    while not assigned and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert assigned, "the member got no assignment"
    try:
        yield consumer
    finally:
        consumer.close()


def offsets(cli: Cli) -> dict[str, dict[str, str]]:
    return {r["PARTITION"]: r for r in table(cli.ok("groups", "describe", "--group", GROUP))}


def test_describe_reset_and_delete_a_group(cli: Cli) -> None:
    cli.ok("topics", "create", "--topic", TOPIC, "--partitions", "2")
    cli.ok("produce", "--topic", TOPIC, "--partition", "0", stdin="a\nb\nc\nd\n")
    cli.ok("produce", "--topic", TOPIC, "--partition", "1", stdin="e\nf\n")
    cli.ok("consume", "--topic", TOPIC, "--group", GROUP, "--partition", "0", "--offset", "0",
           "--max-messages", "3")

    [row] = table(cli.ok("groups", "describe", "--group", GROUP))
    assert row == {"GROUP": GROUP, "TOPIC": TOPIC, "PARTITION": "0", "CURRENT-OFFSET": "3",
                   "LOG-END-OFFSET": "4", "LAG": "1", "CONSUMER-ID": "-", "HOST": "-",
                   "CLIENT-ID": "-"}

    with live_member(cli.address()):
        rows = offsets(cli)
        member = rows["0"]["CONSUMER-ID"]
        assert member.startswith("live-reader")
        assert [(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"],
                 r["HOST"], r["CLIENT-ID"]) for r in rows.values()] == [
            ("3", "4", "1", member, "/127.0.0.1", "live-reader"),
            ("-", "2", "-", member, "/127.0.0.1", "live-reader")]
        [m] = table(cli.ok("groups", "describe", "--group", GROUP, "--members", "--verbose"))
        assert (m["CONSUMER-ID"], m["#PARTITIONS"], m["ASSIGNMENT"]) == (member, "2",
                                                                        f"{TOPIC}(0,1)")
        state = cli.ok("groups", "describe", "--group", GROUP, "--state").splitlines()[1]
        assert state.split()[-3:] == ["range", "Stable", "1"]
        refused = cli.run("groups", "reset-offsets", "--group", GROUP, "--topic", TOPIC,
                          "--to-earliest")
        assert refused.returncode == 1
        assert "the current state is Stable" in refused.stderr

    plan = cli.run("groups", "reset-offsets", "--group", GROUP, "--topic", TOPIC,
                   "--to-earliest")
    assert plan.returncode == 0 and "Dry run" in plan.stderr
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["NEW-OFFSET"])
            for r in table(plan.stdout)] == [("0", "3", "0"), ("1", "-", "0")]
    assert offsets(cli)["0"]["CURRENT-OFFSET"] == "3"

    cli.ok("groups", "reset-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0",
           "--to-offset", "1", "--execute")
    assert (offsets(cli)["0"]["CURRENT-OFFSET"], offsets(cli)["0"]["LAG"]) == ("1", "3")
    shifted = cli.json("groups", "reset-offsets", "--group", GROUP, "--all-topics",
                       "--shift-by", "10", "--execute")
    assert shifted["offsets"] == [{"topic": TOPIC, "partition": 0, "current_offset": 1,
                                   "new_offset": 4}]

    assert GROUP in cli.ok("groups", "list").split()
    assert {"GROUP": GROUP, "STATE": "Empty"} in table(cli.ok("groups", "list", "--state"))
    assert cli.ok("groups", "delete", "--group", GROUP).strip() == \
        f"Deleted consumer group '{GROUP}'."
    gone = cli.run("groups", "describe", "--group", GROUP)
    assert gone.returncode == 1 and f"consumer group '{GROUP}' does not exist" in gone.stderr


def test_group_json_and_errors(broker_cli: Cli) -> None:
    broker_cli.ok("topics", "create", "--topic", "views")
    broker_cli.ok("produce", "--topic", "views", stdin="x\ny\n")
    broker_cli.ok("consume", "--topic", "views", "--group", "viewers", "--from-beginning",
                  "--max-messages", "2")
    [described] = broker_cli.json("groups", "describe", "--group", "viewers")
    assert described["state"] == "Empty" and described["members"] == []
    assert described["offsets"] == [{"topic": "views", "partition": 0, "current_offset": 2,
                                     "log_end_offset": 2, "lag": 0, "consumer_id": None,
                                     "host": None, "client_id": None}]
    assert {"group": "viewers", "state": "Empty"} in broker_cli.json("groups", "list")
    to_time = broker_cli.json("groups", "reset-offsets", "--group", "viewers", "--topic",
                              "views", "--to-datetime", "1970-01-01T00:00:00Z")
    assert to_time["executed"] is False and to_time["offsets"][0]["new_offset"] == 0
    for args, code in ((("groups", "describe", "--group", "nobody"), 1),
                       (("groups", "describe"), 2),
                       (("groups", "reset-offsets", "--group", "viewers", "--to-earliest"), 2),
                       (("groups", "reset-offsets", "--group", "viewers", "--topic", "views",
                         "--to-latest", "--to-earliest"), 2)):
        assert broker_cli.run(*args).returncode == code, args
