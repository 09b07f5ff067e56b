"""Job: back-fill from the records a topic still retains, with a pylog batch query.

What: a time range of record timestamps (--from inclusive, --to exclusive: epoch ms or ISO 8601;
pylog's startingTimestamp/endingTimestamp look the offsets up with ListOffsets), or an offset
range (--starting-offsets/--ending-offsets, Spark's offset JSON), or the whole topic.
Where to: Parquet files (--output DIR, partitioned by the records' UTC date, key and value as
UTF-8 strings unless --binary), or another topic (--to-topic: key, value and headers copied; the
records get new offsets and timestamps).

    python jobs/backfill.py --topic clicks --from 2024-05-01 --to 2024-05-02 --output /lake/clicks
    python jobs/backfill.py --topic clicks --from 2024-05-01T12:00:00Z --to-topic clicks-replay
    python jobs/backfill.py --topic clicks --starting-offsets '{"clicks":{"0":100,"1":80}}' \\
        --ending-offsets latest --output /tmp/clicks-parquet --mode overwrite
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python jobs/backfill.py`: make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs import cluster, spark_session
from jobs.arguments import epoch_ms, new_parser
from jobs.console import run_reporting, say
from jobs.events import iso_ms


@dataclass(frozen=True)
class BackfillResult:
    """What was copied: the record count and the first and last record timestamps."""

    records: int
    first_ms: int | None
    last_ms: int | None


def parser() -> argparse.ArgumentParser:
    p = new_parser("backfill.py", __doc__)
    p.add_argument("--topic", required=True, help="topic to read")
    span = p.add_argument_group("range (default: every retained record)")
    span.add_argument("--from", dest="from_ms", type=epoch_ms, metavar="TIME",
                      help="first record timestamp to copy (a time without zone is local time)")
    span.add_argument("--to", dest="to_ms", type=epoch_ms, metavar="TIME",
                      help="copy records with timestamps before this")
    span.add_argument("--starting-offsets", metavar="JSON",
                      help='earliest or {"topic":{"0":23}} (instead of --from)')
    span.add_argument("--ending-offsets", metavar="JSON",
                      help='latest or {"topic":{"0":42}}, exclusive (instead of --to)')
    sink = p.add_argument_group("destination (one of)")
    target = sink.add_mutually_exclusive_group(required=True)
    target.add_argument("--output", type=Path, metavar="DIR", help="write Parquet files here")
    target.add_argument("--to-topic", metavar="TOPIC", help="re-publish to this topic")
    sink.add_argument("--mode", choices=("error", "append", "overwrite", "ignore"),
                      default="error", help="Parquet save mode when DIR exists")
    sink.add_argument("--binary", action="store_true",
                      help="Parquet: keep key and value as bytes instead of UTF-8 strings")
    sink.add_argument("--keep-partitions", action="store_true",
                      help="--to-topic: write each record to its source partition number "
                           "(default: partitioned by key)")
    cluster.add_arguments(p)
    spark_session.add_arguments(p)
    return p


def range_options(args: argparse.Namespace) -> dict[str, str]:
    """pylog read options for the range the arguments name."""
    if (args.from_ms is not None and args.starting_offsets) or (
            args.to_ms is not None and args.ending_offsets):
        raise SystemExit("give a time (--from/--to) or offsets (--starting-offsets/"
                         "--ending-offsets) for each end of the range, not both")
    if args.from_ms is not None and args.to_ms is not None and args.from_ms >= args.to_ms:
        raise SystemExit("--from must be before --to")
    options: dict[str, str] = {}
    if args.from_ms is not None:
        options["startingTimestamp"] = str(args.from_ms)
        # A --from after the last record is an empty range, not an error.
        options["startingOffsetsByTimestampStrategy"] = "latest"
    elif args.starting_offsets:
        options["startingOffsets"] = args.starting_offsets
    if args.to_ms is not None:
        options["endingTimestamp"] = str(args.to_ms)
    elif args.ending_offsets:
        options["endingOffsets"] = args.ending_offsets
    return options


def read_range(spark: Any, args: argparse.Namespace, bootstrap: str) -> Any:
    return (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", args.topic).option("includeHeaders", "true")
            .options(**range_options(args)).load())


def to_parquet(records: Any, args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    if not args.binary:
        records = (records.withColumn("key", F.col("key").cast("string"))
                   .withColumn("value", F.col("value").cast("string")))
    dated = records.withColumn("date", F.to_date("timestamp"))
    dated.write.mode(args.mode).partitionBy("date").parquet(str(args.output))


def to_topic(records: Any, args: argparse.Namespace, bootstrap: str) -> None:
    columns = ["key", "value", "headers"] + (["partition"] if args.keep_partitions else [])
    (records.select(*columns).write.format("pylog").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", args.to_topic).mode("append").save())


def run(args: argparse.Namespace, spark: Any) -> BackfillResult:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    bootstrap = cluster.resolve(args)
    cluster.require_topic(bootstrap, args.topic)
    destination = str(args.output) if args.output is not None else f"topic {args.to_topic}"
    say(f"back-filling {args.topic} {describe_range(args)} -> {destination}")
    seen = Observation("backfill")
    records = read_range(spark, args, bootstrap).observe(
        seen, F.count(F.lit(1)).alias("records"),
        F.min("timestamp").alias("first"), F.max("timestamp").alias("last"))
    if args.output is not None:
        to_parquet(records, args)
    else:
        to_topic(records, args, bootstrap)
    result = _result(seen.get)
    span = (f", timestamps {iso_ms(result.first_ms)} .. {iso_ms(result.last_ms)}"
            if result.first_ms is not None and result.last_ms is not None else "")
    say(f"copied {result.records} records to {destination}{span}")
    return result


def describe_range(args: argparse.Namespace) -> str:
    start = (iso_ms(args.from_ms) if args.from_ms is not None
             else args.starting_offsets or "earliest")
    end = iso_ms(args.to_ms) if args.to_ms is not None else args.ending_offsets or "latest"
    return f"[{start}, {end})"


def _result(observed: dict[str, Any]) -> BackfillResult:
    def ms(value: Any) -> int | None:
        return None if value is None else int(value.timestamp() * 1000)

    return BackfillResult(int(observed.get("records") or 0), ms(observed.get("first")),
                          ms(observed.get("last")))


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    range_options(args)  # bad ranges fail before Spark starts
    args.bootstrap_server = cluster.resolve(args)
    with spark_session.running("backfill", args.master, args.shuffle_partitions) as spark:
        run(args, spark)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_reporting("backfill", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
