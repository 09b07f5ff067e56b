"""`spark-log reassign-partitions`: move partitions between brokers with the actions, JSON files
and output of kafka-reassign-partitions.sh — `--generate` proposes an assignment of some topics
over a broker list, `--execute` starts it (optionally `--throttle`d), `--verify` reports each
partition completed or still in progress (and clears the throttles once nothing moves),
`--list` shows every move in progress and `--cancel` reverts moves.

Moves go through AlterPartitionReassignments and ListPartitionReassignments (the project's
protocol client: librdkafka has neither); replicas, brokers and configs through confluent-kafka's
AdminClient. A move completes once its new replicas are in sync (the controller then drops the
replicas it removes).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from spark_log.client.partition_reassignments import (
    Ongoing,
    alter_reassignments,
    list_reassignments,
)
from spark_log.client.wire import WireClient, WireError
from spark_log.metadata import PlacementError, UsableBroker, place_replicas

from .cluster import describe_cluster
from .connect import REQUEST_TIMEOUT_S, Connection, add_connection_arguments, connect
from .errors import CliError, UsageError, from_kafka
from .reassignment_json import (
    Assignment,
    format_assignment,
    read_reassignment,
    read_topics_to_move,
    tp_text,
)
from .replication_throttles import clear_throttles, moves, set_throttles

TopicPartition = tuple[str, int]

_EXISTING = ("Cannot execute because there is an existing partition assignment. Use "
             "--additional to override this and create a new partition assignment in addition "
             "to the existing one. The --additional flag can also be used to change the "
             "throttle by resubmitting the current reassignment.")
_VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment "
                   "completes, to ensure the throttle is removed.")

# action: (flags it needs, flags it also allows)
_FLAGS = {
    "generate": ({"topics_to_move_json_file", "broker_list"}, {"disable_rack_aware"}),
    "execute": ({"reassignment_json_file"}, {"throttle", "additional"}),
    "verify": ({"reassignment_json_file"}, {"preserve_throttles"}),
    "list": (set(), set()),
    "cancel": ({"reassignment_json_file"}, {"preserve_throttles"}),
}


def add_reassign_partitions_parser(commands: Any) -> None:
    p = commands.add_parser(
        "reassign-partitions", help="move partitions between brokers",
        description="Move partitions between brokers, like kafka-reassign-partitions.sh: "
                    "exactly one of --generate, --execute, --verify, --list, --cancel.")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("generate", "propose an assignment of --topics-to-move-json-file's "
                                    "topics over --broker-list (prints current and proposed)"),
                       ("execute", "start the moves of --reassignment-json-file"),
                       ("verify", "report whether the moves of --reassignment-json-file are "
                                  "complete; once none is in progress, clear the throttles"),
                       ("list", "list every move in progress"),
                       ("cancel", "cancel the moves of --reassignment-json-file in progress")):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name,
                            help=text)
    p.add_argument("--reassignment-json-file", type=Path, metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,'
                        '"replicas":[1,2,3]}]}')
    p.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE",
                   help='{"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="ID,ID,...",
                   help="the brokers --generate places replicas on")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="--generate ignores the brokers' racks")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                   help="--execute: cap the replication traffic of the moves at this rate "
                        "(on every broker taking part)")
    p.add_argument("--additional", action="store_true",
                   help="--execute although other moves are in progress")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="--verify/--cancel leave the throttles in place")
    add_connection_arguments(p)
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    _check_flags(args)
    connection = connect(args)
    with WireClient(connection.bootstrap, REQUEST_TIMEOUT_S,
                    "spark-log-reassign-partitions") as wire:
        try:
            _ACTIONS[args.action](args, connection, wire)
        except WireError as exc:
            raise CliError(str(exc)) from None
        except OSError as exc:
            raise CliError(f"the broker at {wire.bootstrap} did not answer: {exc}") from None
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    needed, allowed = _FLAGS[args.action]
    for name in sorted(needed):
        if getattr(args, name) is None:
            raise UsageError(f"--{args.action} needs --{name.replace('_', '-')}")
    extra = ("reassignment_json_file", "topics_to_move_json_file", "broker_list",
             "disable_rack_aware", "throttle", "additional", "preserve_throttles")
    for name in extra:
        if name not in needed | allowed and getattr(args, name) not in (None, False):
            raise UsageError(f"--{name.replace('_', '-')} does not go with --{args.action}")
    if args.throttle is not None and args.throttle < 0:
        raise UsageError(f"--throttle {args.throttle}: expected bytes per second, 0 or more")


# ---- --generate -------------------------------------------------------------------------------

def _generate(args: argparse.Namespace, connection: Connection, wire: WireClient) -> None:
    brokers = _broker_list(args.broker_list)
    topics = read_topics_to_move(args.topics_to_move_json_file)
    admin = connection.admin()
    current = _assignment(admin, topics)
    racks = {b.id: b.rack for b in describe_cluster(admin).brokers}
    unknown = [b for b in brokers if b not in racks]
    if unknown:
        raise _unknown_broker(unknown[0], racks)
    with_rack = [b for b in brokers if racks[b] is not None]
    if not args.disable_rack_aware and with_rack and len(with_rack) != len(brokers):
        raise CliError("Not all brokers have rack information. Add --disable-rack-aware in "
                       "command line to make replica assignment without rack information.")
    usable = [UsableBroker(b, None if args.disable_rack_aware else racks[b]) for b in brokers]
    proposed: Assignment = {}
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, partitions[0])])
        try:
            placed = place_replicas(usable, len(partitions), factor, random.randrange)
        except PlacementError as exc:
            raise CliError(f"topic {topic}: {exc}") from None
        proposed.update({(topic, p): list(r) for p, r in zip(partitions, placed, strict=True)})
    print(f"Current partition replica assignment\n{format_assignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_assignment(proposed)}")


def _broker_list(text: str) -> list[int]:
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() for item in items):
        raise UsageError(f"--broker-list: expected broker ids separated by commas, got {text!r}")
    brokers = [int(item) for item in items]
    twice = sorted({b for b in brokers if brokers.count(b) > 1})
    if twice:
        raise UsageError(f"--broker-list: Broker list contains duplicate entries: "
                         f"{','.join(map(str, twice))}")
    return brokers


# ---- --execute --------------------------------------------------------------------------------

def _execute(args: argparse.Namespace, connection: Connection, wire: WireClient) -> None:
    proposed = read_reassignment(args.reassignment_json_file)
    ongoing = list_reassignments(wire)
    if ongoing and not args.additional:
        raise CliError(_EXISTING)
    admin = connection.admin()
    cluster = {b.id: b.rack for b in describe_cluster(admin).brokers}
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - set(cluster))
    if unknown:
        raise _unknown_broker(unknown[0], cluster)
    current = _assignment(admin, sorted({t for t, _ in proposed}), proposed)
    print(f"Current partition replica assignment\n\n{format_assignment(current)}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None:
        print(_VERIFY_WARNING)
        set_throttles(admin, moves(ongoing, proposed, current), args.throttle)
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    refused = alter_reassignments(wire, proposed)
    if refused:
        raise CliError("Error reassigning partition(s): " + "; ".join(
            f"{tp_text(tp)}: {error}" for tp, error in sorted(refused.items())))
    print(f"Successfully started partition reassignment{'s' if len(proposed) > 1 else ''} "
          f"for {','.join(tp_text(tp) for tp in sorted(proposed))}")


# ---- --verify, --list, --cancel ---------------------------------------------------------------

def _verify(args: argparse.Namespace, connection: Connection, wire: WireClient) -> None:
    targets = read_reassignment(args.reassignment_json_file)
    ongoing = list_reassignments(wire)
    admin = connection.admin()
    current = _assignment(admin, sorted({t for t, _ in targets}), targets)
    print("Status of partition reassignment:")
    for tp, replicas in sorted(targets.items()):
        if tp in ongoing:
            print(f"Reassignment of partition {tp_text(tp)} is still in progress.")
        elif current[tp] == replicas:
            print(f"Reassignment of partition {tp_text(tp)} is completed.")
        else:
            print(f"There is no active reassignment of partition {tp_text(tp)}, but replica "
                  f"set is {_ids(current[tp])} rather than {_ids(replicas)}.")
    if not ongoing and not args.preserve_throttles:
        _clear_all_throttles(admin, targets)


def _list(args: argparse.Namespace, connection: Connection, wire: WireClient) -> None:
    ongoing = list_reassignments(wire)
    if not ongoing:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for tp, move in sorted(ongoing.items()):
        print(_ongoing_line(tp, move))


def _ongoing_line(tp: TopicPartition, move: Ongoing) -> str:
    line = f"{tp_text(tp)}: replicas: {_ids(move.replicas)}."
    if move.adding:
        line += f" adding: {_ids(move.adding)}."
    if move.removing:
        line += f" removing: {_ids(move.removing)}."
    return line


def _cancel(args: argparse.Namespace, connection: Connection, wire: WireClient) -> None:
    targets = read_reassignment(args.reassignment_json_file)
    admin = connection.admin()
    _assignment(admin, sorted({t for t, _ in targets}), targets)  # unknown ones: an error
    moving = sorted(list_reassignments(wire, targets))
    if moving:
        refused = alter_reassignments(wire, dict.fromkeys(moving))
        if refused:
            raise CliError("Error cancelling partition reassignments for: " + "; ".join(
                f"{tp_text(tp)}: {error}" for tp, error in sorted(refused.items())))
        print(f"Successfully cancelled partition reassignment{'s' if len(moving) > 1 else ''} "
              f"for: {','.join(tp_text(tp) for tp in moving)}")
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        _clear_all_throttles(admin, targets)


def _clear_all_throttles(admin: Any, targets: Assignment) -> None:
    brokers = {b.id for b in describe_cluster(admin).brokers}
    brokers.update(b for replicas in targets.values() for b in replicas)
    topics = sorted({t for t, _ in targets})
    print(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} "
          f"{_ids(sorted(brokers))}")
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} "
          f"{','.join(topics)}")
    clear_throttles(admin, brokers, topics)


# ---- the cluster as it is -----------------------------------------------------------------------

def _assignment(admin: Any, topics: list[str], wanted: Assignment | None = None
                ) -> Assignment:
    """The replicas of every partition of `topics` (only those in `wanted`, when given); a
    CliError names the first topic or partition that does not exist."""
    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise from_kafka("listing topics", exc) from None
    result: Assignment = {}
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise CliError(f"Topic {topic} not found.")
        for partition, info in found.partitions.items():
            if wanted is None or (topic, partition) in wanted:
                result[(topic, partition)] = list(info.replicas)
    missing = sorted(set(wanted or ()) - set(result))
    if missing:
        raise CliError(f"Unable to find partition: {', '.join(tp_text(tp) for tp in missing)}")
    return result


def _unknown_broker(broker: int, cluster: dict[int, Any]) -> CliError:
    return CliError(f"Unknown broker id {broker} (the cluster's brokers: "
                    f"{_ids(sorted(cluster))})")


def _ids(ids: Any) -> str:
    return ",".join(str(i) for i in ids)


_ACTIONS = {"generate": _generate, "execute": _execute, "verify": _verify, "list": _list,
            "cancel": _cancel}
