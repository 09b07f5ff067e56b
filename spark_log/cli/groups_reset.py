"""`spark-log groups reset-offsets`: move a group's committed offsets, as
kafka-consumer-groups --reset-offsets does.

Scope: `--topic T` or `--topic T:0,2` (repeatable), or `--all-topics` (every topic the group has
offsets for). Target: `--to-earliest`, `--to-latest`, `--to-offset N`, `--shift-by N`,
`--to-datetime` (epoch ms or ISO 8601) or `--to-current`; a target outside the log is clamped
to its start or end, as Kafka clamps it. Nothing changes without `--execute` (`--dry-run` is
the default and prints the plan); a group with active members is refused, since its members
would overwrite the new offsets.
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .arguments import timestamp_ms
from .connect import connect, partition_count, wait
from .errors import CliError, UsageError
from .group_state import TP, GroupView, end_offsets, list_offsets, load_group, start_offsets
from .output import notice, print_json, print_table

HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")


def add_reset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", required=True)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                       help="a topic, optionally with partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N", help="may be negative")
    target.add_argument("--to-datetime", metavar="MS|ISO-8601")
    target.add_argument("--to-current", action="store_true")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")


def run_reset(args: argparse.Namespace) -> int:
    admin = connect(args).admin()
    view = load_group(admin, args.group)
    if view.is_active:
        raise CliError(f"assignments can only be reset if the group '{args.group}' is "
                       f"inactive, but the current state is {view.state}")
    partitions = _scope(admin, args, view)
    plan = _plan(admin, args, view, partitions)
    if args.execute:
        request = [ConsumerGroupTopicPartitions(
            args.group, [TopicPartition(t, p, o) for (t, p), o in plan.items()])]
        wait(admin.alter_consumer_group_offsets(request)[args.group],
             f"committing offsets for group {args.group!r}")
    _print_plan(args, view, plan)
    return 0


def _scope(admin: Any, args: argparse.Namespace, view: GroupView) -> list[TP]:
    if args.all_topics:
        if not view.committed:
            raise CliError(f"group {args.group!r} has no committed offsets; name --topic")
        return sorted(view.committed)
    partitions: list[TP] = []
    for spec in args.topic:
        topic, _, listed = spec.partition(":")
        count = partition_count(admin, topic)
        chosen = _partition_list(spec, listed) if listed else list(range(count))
        bad = [p for p in chosen if not 0 <= p < count]
        if bad:
            raise UsageError(f"--topic {spec}: topic {topic!r} has partitions 0..{count - 1}")
        partitions += [(topic, p) for p in chosen]
    return sorted(set(partitions))


def _partition_list(spec: str, listed: str) -> list[int]:
    try:
        return [int(p) for p in listed.split(",")]
    except ValueError:
        raise UsageError(f"--topic {spec}: expected TOPIC or TOPIC:0,1,2") from None


def _plan(admin: Any, args: argparse.Namespace, view: GroupView, partitions: list[TP]
          ) -> dict[TP, int]:
    starts, ends = start_offsets(admin, partitions), end_offsets(admin, partitions)
    if args.to_earliest:
        wanted = dict(starts)
    elif args.to_latest:
        wanted = dict(ends)
    elif args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    elif args.to_datetime is not None:
        when = timestamp_ms(args.to_datetime, "--to-datetime")
        found = list_offsets(admin, partitions, OffsetSpec.for_timestamp(when))
        wanted = {tp: o if o >= 0 else ends[tp] for tp, o in found.items()}
    else:
        wanted = {tp: _current(view, tp) + (args.shift_by or 0) for tp in partitions}
    return {tp: min(max(wanted[tp], starts[tp]), ends[tp]) for tp in partitions}


def _current(view: GroupView, tp: TP) -> int:
    if tp not in view.committed:
        raise CliError(f"cannot shift or keep the offset of {tp[0]}-{tp[1]}: group "
                       f"{view.group_id!r} has no committed offset there")
    return view.committed[tp]


def _print_plan(args: argparse.Namespace, view: GroupView, plan: dict[TP, int]) -> None:
    if args.json:
        print_json({"group": view.group_id, "executed": bool(args.execute),
                    "offsets": [{"topic": t, "partition": p,
                                 "current_offset": view.committed.get((t, p)),
                                 "new_offset": o} for (t, p), o in plan.items()]})
        return
    print_table(HEADERS, [(view.group_id, t, p, view.committed.get((t, p)), o)
                          for (t, p), o in plan.items()])
    if not args.execute:
        notice("Dry run: nothing was changed. Run again with --execute to commit these "
               "offsets.")
