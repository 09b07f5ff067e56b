"""`spark-log consume`: print a topic's records, like kafka-console-consumer.

Where to start: new records only (default), `--from-beginning`, `--offset N|earliest|latest`
(N needs `--partition` and must lie between the partition's log start and end offsets), or
`--from-timestamp` (epoch ms or ISO 8601: the first record at or after it, per partition).
With `--group` and no explicit position the consumer subscribes as a member of the group
(starting from its committed offsets) and commits what it printed when it stops; with an
explicit position it reads the partitions it was given and still commits for the group. It
stops after `--max-messages`, after `--timeout-ms` without a record (a group member's wait for
its partitions does not count), or on Ctrl-C, and reports how many records it processed on
stderr. See `message_format` for the output (`--property print.key=true` ... or `--json`).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

from .arguments import key_values, timestamp_ms
from .connect import REQUEST_TIMEOUT_S, add_connection_arguments, connect, partition_count
from .errors import CliError, UsageError, from_kafka
from .message_format import DefaultFormatter, JsonFormatter
from .output import notice, progress

POLL_S = 0.2
JOIN_TIMEOUT_S = 60.0  # for a group member to get its partitions


def add_consume_parser(commands: Any) -> None:
    p = commands.add_parser("consume", help="print records of a topic",
                            description="Print records, like kafka-console-consumer.")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="start offset: a number (with --partition), earliest or "
                                    "latest")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest record (a group's committed offsets win)")
    p.add_argument("--from-timestamp", metavar="MS|ISO-8601",
                   help="start at the first record at or after this time")
    p.add_argument("--group", help="consumer group to join and commit for")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="formatter setting: print.key, print.timestamp, print.partition, "
                        "print.offset, print.headers, print.value, key.separator, "
                        "line.separator, headers.separator, null.literal")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka/Kafka consumer setting (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    add_connection_arguments(p)
    p.set_defaults(run=_consume)


def _check_flags(args: argparse.Namespace) -> None:
    starts = [f for f, on in (("--offset", args.offset is not None),
                              ("--from-beginning", args.from_beginning),
                              ("--from-timestamp", args.from_timestamp is not None)) if on]
    if len(starts) > 1:
        raise UsageError(f"{starts[0]} and {starts[1]} cannot be used together")
    if args.offset not in (None, "earliest", "latest"):
        if not args.offset.isdigit():
            raise UsageError(f"--offset: expected a non-negative number, earliest or latest, "
                             f"got {args.offset!r}")
        if args.partition is None:
            raise UsageError("--offset N needs --partition")
    if args.from_timestamp is not None:
        args.from_timestamp_ms = timestamp_ms(args.from_timestamp, "--from-timestamp")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError("--timeout-ms must not be negative")


@dataclass
class _Run:
    """What a consume run has done: records printed, and whether it has partitions yet (a
    group member waits for its assignment, which --timeout-ms does not count)."""

    count: int = 0
    assigned: bool = True

    def on_assign(self, _consumer: Any, _partitions: list[TopicPartition]) -> None:
        self.assigned = True  # the client assigns them itself once this returns


def _consume(args: argparse.Namespace) -> int:
    _check_flags(args)
    formatter = JsonFormatter() if args.json else DefaultFormatter(
        key_values(args.property, "--property"))
    connection = connect(args)
    partitions = partition_count(connection.admin(), args.topic)
    if args.partition is not None and not 0 <= args.partition < partitions:
        raise UsageError(f"--partition {args.partition}: topic {args.topic!r} has partitions "
                         f"0..{partitions - 1}")
    subscribe = args.group is not None and args.partition is None and args.offset is None \
        and args.from_timestamp is None
    consumer = connection.consumer(**{
        "group.id": args.group or f"spark-log-console-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False, "isolation.level": args.isolation_level,
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        **key_values(args.consumer_property, "--consumer-property")})
    run = _Run(assigned=not subscribe)
    started = False
    try:
        if subscribe:
            consumer.subscribe([args.topic], on_assign=run.on_assign)
        else:
            consumer.assign(_start_positions(consumer, args, partitions))
        started = True
        _print_records(consumer, formatter, args, run)
    finally:
        try:
            _finish(consumer, args.group is not None and run.count > 0)
        finally:
            if started:
                notice(f"Processed a total of {run.count} messages")
    return 0


def _start_positions(consumer: Any, args: argparse.Namespace, partitions: int
                     ) -> list[TopicPartition]:
    chosen = [args.partition] if args.partition is not None else list(range(partitions))
    if args.from_timestamp is not None:
        wanted = [TopicPartition(args.topic, p, args.from_timestamp_ms) for p in chosen]
        try:
            found = consumer.offsets_for_times(wanted, timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise from_kafka("looking up offsets by time", exc) from None
        return [TopicPartition(args.topic, tp.partition,
                               tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]
    if args.from_beginning or args.offset == "earliest":
        start = OFFSET_BEGINNING
    elif args.offset in (None, "latest"):
        start = OFFSET_END
    else:
        start = _checked_offset(consumer, args.topic, args.partition, int(args.offset))
    return [TopicPartition(args.topic, p, start) for p in chosen]


def _checked_offset(consumer: Any, topic: str, partition: int, offset: int) -> int:
    """`offset` if it lies in [log start, log end] of the partition; else a CliError, rather
    than the silent jump to the end that auto.offset.reset would make."""
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise from_kafka(f"reading the offsets of {topic}-{partition}", exc) from None
    if not low <= offset <= high:
        raise CliError(f"--offset {offset}: {topic}-{partition} holds offsets {low} to "
                       f"{high} (log start to log end)")
    return offset


def _print_records(consumer: Any, formatter: Any, args: argparse.Namespace, run: _Run) -> None:
    out = sys.stdout.buffer
    idle_limit = None if args.timeout_ms is None else args.timeout_ms / 1000
    join_deadline = time.monotonic() + JOIN_TIMEOUT_S
    last = time.monotonic()
    show_bar = not sys.stdout.isatty()
    with progress("consuming", args.max_messages if show_bar else None) as bar:
        while args.max_messages is None or run.count < args.max_messages:
            msg = consumer.poll(POLL_S)
            if not run.assigned:
                if time.monotonic() > join_deadline:
                    raise CliError(f"group {args.group!r} assigned no partitions within "
                                   f"{JOIN_TIMEOUT_S:.0f}s")
                last = time.monotonic()  # waiting to join is not waiting for records
            if msg is None:
                if idle_limit is not None and time.monotonic() - last >= idle_limit:
                    break
                continue
            if msg.error() is not None:
                raise CliError(f"reading {args.topic}: {msg.error().str()}")
            out.write(formatter.format(msg))
            out.flush()
            run.count += 1
            last = time.monotonic()
            if show_bar:
                bar.advance()


def _finish(consumer: Any, commit: bool) -> None:
    try:
        if commit:
            consumer.commit(asynchronous=False)
    except KafkaException as exc:
        raise from_kafka("committing the group's offsets", exc) from None
    finally:
        consumer.close()
