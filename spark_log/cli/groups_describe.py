"""`spark-log groups describe`: kafka-consumer-groups --describe's three views of a group.

Offsets (default): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
CLIENT-ID, one row per partition the group has committed or been assigned. `--members`: GROUP
CONSUMER-ID HOST CLIENT-ID #PARTITIONS (and ASSIGNMENT with `--verbose`). `--state`: GROUP
COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS. `--json` prints every view at once.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from .connect import connect
from .errors import UsageError
from .group_state import TP, GroupView, end_offsets, group_ids, load_group
from .output import notice, print_json, print_table

OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def run_describe(args: argparse.Namespace) -> int:
    if args.members and args.state:
        raise UsageError("--members and --state cannot be used together")
    admin = connect(args).admin()
    wanted = [g for g, _ in group_ids(admin)] if args.all_groups else args.group
    if not wanted:
        raise UsageError("groups describe needs --group GROUP or --all-groups")
    views = [load_group(admin, g) for g in wanted]
    if args.json:
        print_json([_json(admin, v) for v in views])
        return 0
    for i, view in enumerate(views):
        if i:
            print()
        if view.state == "Empty" or not view.members:
            notice(f"Consumer group '{view.group_id}' has no active members.")
        if args.state:
            _print_state(view)
        elif args.members:
            _print_members(view, args.verbose)
        else:
            _print_offsets(admin, view)
    return 0


def offset_rows(admin: Any, view: GroupView) -> list[dict[str, Any]]:
    """One dict per partition: current offset, log end offset, lag and its owner, if any."""
    partitions = sorted(set(view.committed) | {tp for m in view.members for tp in m.partitions})
    ends = end_offsets(admin, partitions)
    rows = []
    for tp in partitions:
        current, end = view.committed.get(tp), ends.get(tp)
        owner = view.owner(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end,
                     "lag": None if current is None or end is None else max(0, end - current),
                     "consumer_id": owner.member_id if owner else None,
                     "host": owner.host if owner else None,
                     "client_id": owner.client_id if owner else None})
    return rows


def _print_offsets(admin: Any, view: GroupView) -> None:
    rows = [(view.group_id, r["topic"], r["partition"], r["current_offset"],
             r["log_end_offset"], r["lag"], r["consumer_id"], r["host"], r["client_id"])
            for r in offset_rows(admin, view)]
    print_table(OFFSET_HEADERS, rows)


def _print_members(view: GroupView, verbose: bool) -> None:
    headers = (*MEMBER_HEADERS, "ASSIGNMENT") if verbose else MEMBER_HEADERS
    rows = []
    for m in view.members:
        row: list[Any] = [view.group_id, m.member_id, m.host, m.client_id, len(m.partitions)]
        if verbose:
            row.append(_assignment(m.partitions))
        rows.append(row)
    print_table(headers, rows)


def _assignment(partitions: list[TP]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-"


def _print_state(view: GroupView) -> None:
    print_table(STATE_HEADERS, [(view.group_id, f"{view.coordinator} ({view.coordinator_id})",
                                 view.assignor, view.state, len(view.members))])


def _json(admin: Any, view: GroupView) -> dict[str, Any]:
    return {"group": view.group_id, "state": view.state, "assignment_strategy": view.assignor,
            "coordinator": {"id": view.coordinator_id, "address": view.coordinator},
            "members": [{**asdict(m), "partitions": [list(tp) for tp in m.partitions]}
                        for m in view.members],
            "offsets": offset_rows(admin, view)}
