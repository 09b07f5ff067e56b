"""`spark-log groups list|describe|reset-offsets|delete`: consumer groups, with the flags and
columns of kafka-consumer-groups.sh. `describe` lives in `groups_describe`, `reset-offsets` in
`groups_reset`; list and delete are here.
"""

from __future__ import annotations

import argparse
from typing import Any

from .connect import add_connection_arguments, connect, wait
from .group_state import group_ids
from .groups_describe import run_describe
from .groups_reset import add_reset_arguments, run_reset
from .output import print_json, print_table


def add_groups_parser(commands: Any) -> None:
    groups = commands.add_parser("groups", help="list, describe, reset and delete consumer groups",
                                 description="Manage consumer groups, like "
                                             "kafka-consumer-groups.sh.")
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    p = actions.add_parser("list", help="group ids, one per line")
    p.add_argument("--state", action="store_true", help="a GROUP STATE table")
    p.add_argument("--json", action="store_true")
    add_connection_arguments(p)
    p.set_defaults(run=_list)

    p = actions.add_parser("describe", help="offsets and lag, members, or state of groups")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="the group's members")
    view.add_argument("--state", action="store_true", help="coordinator, strategy and state")
    p.add_argument("--verbose", action="store_true", help="with --members: each assignment")
    p.add_argument("--json", action="store_true", help="every view, as JSON")
    add_connection_arguments(p)
    p.set_defaults(run=run_describe)

    p = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    add_reset_arguments(p)
    add_connection_arguments(p)
    p.set_defaults(run=run_reset)

    p = actions.add_parser("delete", help="delete groups (they must have no members)")
    p.add_argument("--group", action="append", required=True, help="group id (repeatable)")
    add_connection_arguments(p)
    p.set_defaults(run=_delete)


def _list(args: argparse.Namespace) -> int:
    groups = group_ids(connect(args).admin())
    if args.json:
        print_json([{"group": g, "state": s} for g, s in groups])
    elif args.state:
        print_table(("GROUP", "STATE"), groups)
    else:
        for group, _ in groups:
            print(group)
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = connect(args).admin()
    for group, future in admin.delete_consumer_groups(args.group).items():
        wait(future, f"deleting group {group!r}")
        print(f"Deleted consumer group '{group}'.")
    return 0
