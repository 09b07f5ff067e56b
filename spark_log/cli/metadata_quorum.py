"""`spark-log metadata-quorum describe --status|--replication`: the controller quorum (KRaft's
`__cluster_metadata` partition) as its leader describes it, with the flags and output of
kafka-metadata-quorum.sh. What is printed is built in `quorum_view`.

The quorum is asked with DescribeQuorum, of a controller listener (`--bootstrap-controller`)
or of a broker (`--bootstrap-server`, which forwards it to the active controller); without
either, of the sidecar broker. A controller that does not lead the quorum names the leader,
which is then asked where the answers say it listens, else the next address given. The
cluster id of `--status` comes from DescribeCluster, which only brokers answer: it is
"unknown" when only controllers are asked. Plaintext listeners only.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from spark_log.client.quorum_info import (
    Address,
    QuorumAnswer,
    QuorumQueryError,
    describe_quorum,
)

from .cluster import describe_cluster
from .connect import Connection, parse_address, sidecar_address
from .errors import CliError, UsageError
from .output import print_json, print_lines, print_table
from .quorum_view import (
    quorum_view,
    replication_json,
    replication_table,
    status_json,
    status_lines,
)

REQUEST_TIMEOUT_S = 15.0


def add_metadata_quorum_parser(commands: Any) -> None:
    quorum = commands.add_parser(
        "metadata-quorum", help="the controller quorum: leader, voters and replication",
        description="Describe the KRaft metadata quorum, like kafka-metadata-quorum.sh. The "
                    "connection flags may come before or after `describe`.")
    _add_target_arguments(quorum, argparse.SUPPRESS)
    actions = quorum.add_subparsers(dest="quorum_command", metavar="ACTION", required=True)
    p = actions.add_parser("describe", help="the quorum's status or its replication")
    view = p.add_mutually_exclusive_group(required=True)
    view.add_argument("--status", action="store_true",
                      help="a summary: leader, epoch, high watermark, lag, voters, observers")
    view.add_argument("--replication", action="store_true",
                      help="one row per replica: log end offset, lag, fetch times, status")
    p.add_argument("--human-readable", action="store_true",
                   help="with --replication: times as 'N ms ago'")
    p.add_argument("--json", action="store_true", help="one JSON document")
    _add_target_arguments(p, argparse.SUPPRESS)
    p.set_defaults(run=_describe)


def _add_target_arguments(parser: argparse.ArgumentParser, default: Any) -> None:
    group = parser.add_argument_group("connection (one of)")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", default=default,
                       help="broker(s) to ask; they forward the request to the active "
                            "controller")
    group.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT]",
                       default=default, help="controller listener(s) to ask")
    group.add_argument("--data-dir", type=Path, default=default,
                       help="data directory of the sidecar broker, asked when neither is "
                            "given (default $SPARK_LOG_DATA_DIR or ~/.spark_log/data)")


def _describe(args: argparse.Namespace) -> int:
    if args.human_readable and not args.replication:
        raise UsageError("--human-readable goes with --replication only")
    server, controller = _flag(args, "bootstrap_server"), _flag(args, "bootstrap_controller")
    if server and controller:
        raise UsageError("give --bootstrap-server or --bootstrap-controller, not both")
    if not server and not controller:
        server = sidecar_address(_flag(args, "data_dir"))
    flag = "--bootstrap-controller" if controller else "--bootstrap-server"
    answer = _ask(flag, parse_addresses(flag, controller or server))
    view = quorum_view(answer.partition, answer.endpoints, answer.version)
    if args.status:
        cluster_id = describe_cluster(Connection(server, {}).admin()).cluster_id \
            if server else None
        if args.json:
            print_json(status_json(view, cluster_id))
        else:
            print_lines(status_lines(view, cluster_id))
    elif args.json:
        print_json(replication_json(view))
    else:
        print_table(*replication_table(view, args.human_readable, int(time.time() * 1000)))
    return 0


def _flag(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name, None)


def parse_addresses(flag: str, text: str) -> list[Address]:
    addresses = []
    for item in [a for a in text.split(",") if a.strip()]:
        try:
            addresses.append(parse_address(item))
        except UsageError:
            raise UsageError(f"{flag}: expected HOST:PORT[,HOST:PORT] (port 1-65535), got "
                             f"{text!r}") from None
    if not addresses:
        raise UsageError(f"{flag}: expected HOST:PORT[,HOST:PORT], got {text!r}")
    return addresses


def _ask(flag: str, addresses: list[Address]) -> QuorumAnswer:
    try:
        return asyncio.run(describe_quorum(addresses, REQUEST_TIMEOUT_S))
    except QuorumQueryError as exc:
        raise CliError(failure_message(flag, exc)) from None


def failure_message(flag: str, exc: QuorumQueryError) -> str:
    """One line: why every address failed, and what to try instead."""
    message = f"describing the metadata quorum: {exc}"
    if exc.leader_id is not None:
        message += (f"; ask the leader, node {exc.leader_id}, at its controller listener "
                    "with --bootstrap-controller")
    elif exc.unsupported and flag == "--bootstrap-server":
        message += "; ask the controllers with --bootstrap-controller"
    return message

