"""`spark-log produce`: records from stdin or a file, one per line, like
kafka-console-producer (`--property parse.key=true`, `key.separator`, `parse.headers` ...; see
`line_reader`), plus `-H KEY=VALUE` headers added to every record, a fixed `--partition` and
`--compression-codec`. It ends with a one-line summary (or `--json`) of what was written where;
any record the broker refused makes the exit code 1.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .arguments import key_values
from .connect import add_connection_arguments, connect, partition_count
from .errors import CliError, UsageError
from .line_reader import INPUT_ERRORS, LineReader, LineRecord
from .output import Tracker, print_json, progress

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
FLUSH_TIMEOUT_S = 60.0


@dataclass
class ProduceReport:
    topic: str
    records: int = 0
    errors: int = 0
    partitions: Counter[int] = field(default_factory=Counter)
    first_error: str | None = None

    def delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            self.first_error = self.first_error or str(err)
        else:
            self.records += 1
            self.partitions[msg.partition()] += 1


def add_produce_parser(commands: Any) -> None:
    p = commands.add_parser("produce", help="write records from stdin or a file",
                            description="Write one record per input line, like "
                                        "kafka-console-producer.")
    p.add_argument("--topic", required=True)
    p.add_argument("--file", type=Path, help="read lines from this file instead of stdin")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="line reader setting: parse.key, key.separator, parse.headers, "
                        "headers.delimiter, headers.separator, headers.key.separator, "
                        "null.marker, ignore.error")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header for every record (repeatable)")
    p.add_argument("--partition", type=int, help="write every record to this partition")
    p.add_argument("--compression-codec", "--compression", dest="compression",
                   choices=CODECS, default="none", help="batch compression (default none)")
    p.add_argument("--request-required-acks", dest="acks", default="all",
                   choices=("all", "-1", "1", "0"), help="acks (default all)")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka/Kafka producer setting (repeatable)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_connection_arguments(p)
    p.set_defaults(run=_produce)


def _produce(args: argparse.Namespace) -> int:
    reader = LineReader(key_values(args.property, "--property"))
    headers = [(k, v.encode()) for k, v in key_values(args.header, "--header").items()]
    connection = connect(args)
    count = partition_count(connection.admin(), args.topic)
    if args.partition is not None and not 0 <= args.partition < count:
        raise UsageError(f"--partition {args.partition}: topic {args.topic!r} has partitions "
                         f"0..{count - 1}")
    # murmur2 is the partitioner of Kafka's Java clients: a key lands where theirs put it.
    producer = connection.producer(**{"compression.type": args.compression, "acks": args.acks,
                                      "linger.ms": 5, "partitioner": "murmur2_random"},
                                   **key_values(args.producer_property, "--producer-property"))
    report = ProduceReport(args.topic)
    with _lines(args.file) as (lines, size), progress("producing", size) as bar:
        _send_all(producer, reader, lines, headers, args, report, bar)
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left:
        raise CliError(f"{left} record(s) not delivered within {FLUSH_TIMEOUT_S:.0f}s")
    _print_report(report, args.json)
    if report.errors:
        raise CliError(f"{report.errors} record(s) failed: {report.first_error}")
    return 0


@contextmanager
def _lines(path: Path | None) -> Iterator[tuple[IO[str], int | None]]:
    """Input lines as text that keeps every byte (see `line_reader.INPUT_ERRORS`), with the
    input's size when it is a file."""
    if path is None:
        yield io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors=INPUT_ERRORS,
                               newline=""), None
        return
    try:
        handle = path.open(encoding="utf-8", errors=INPUT_ERRORS, newline="")
    except OSError as exc:
        raise UsageError(f"--file {path}: {exc.strerror or exc}") from None
    with handle:
        yield handle, path.stat().st_size


def _send_all(producer: Any, reader: LineReader, lines: IO[str], headers: list[Any],
              args: argparse.Namespace, report: ProduceReport, bar: Tracker) -> None:
    for number, raw in enumerate(lines, 1):
        bar.advance(len(raw.encode("utf-8", INPUT_ERRORS)))
        record = reader.read(raw.rstrip("\n").rstrip("\r"), number)
        _send(producer, args.topic, args.partition, record, headers, report)


def _send(producer: Any, topic: str, partition: int | None, record: LineRecord,
          headers: list[Any], report: ProduceReport) -> None:
    extra = {} if partition is None else {"partition": partition}
    all_headers = record.headers + headers
    while True:
        try:
            producer.produce(topic, record.value, record.key, headers=all_headers or None,
                             on_delivery=report.delivered, **extra)
            break
        except BufferError:  # the local queue is full: let deliveries drain
            producer.poll(0.05)
    producer.poll(0)


def _print_report(report: ProduceReport, as_json: bool) -> None:
    partitions = dict(sorted(report.partitions.items()))
    if as_json:
        print_json({"topic": report.topic, "records": report.records, "errors": report.errors,
                    "partitions": {str(p): n for p, n in partitions.items()}})
        return
    spread = ", ".join(f"{p}: {n}" for p, n in partitions.items()) or "none"
    print(f"Produced {report.records} record(s) to {report.topic} (by partition {spread}).")
