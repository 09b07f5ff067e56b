"""Job: streaming ETL from a clickstream topic to a topic of per-window statistics, with pylog
on both ends.

pylog source (--topic) -> from_json with the events' schema -> watermark on event_time ->
tumbling windows (--window): events, events per type, distinct users, revenue -> JSON records
keyed by window start -> pylog sink (--output-topic), checkpointed in --checkpoint. A restarted
job resumes from its checkpoint. The output topic is created compacted (the latest record per
window is the result) when it does not exist.

Output modes: `append` (default) writes each window once, final, when the watermark passes its
end, through pylog's streaming sink. `update` writes a window again whenever it changes, so
open windows are visible early; Spark does not offer update mode to Python data sources, so it
goes through foreachBatch and a pylog batch write of each micro-batch's changed windows.

Triggers: --available-now processes what is in the topic and stops (an incremental batch);
otherwise a micro-batch every --processing-time until Ctrl-C or --timeout.

    python jobs/stream_etl.py --available-now
    python jobs/stream_etl.py --topic clicks --output-topic click-stats --window "1 minute" \\
        --watermark "2 minutes" --processing-time "10 seconds" --checkpoint /tmp/ckpt
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python jobs/stream_etl.py`: make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs import cluster, progress, spark_session, window_stats
from jobs.arguments import key_values, new_parser
from jobs.console import run_reporting, say

DEFAULT_TOPIC = "clicks"
DEFAULT_OUTPUT = "click-stats"
CHECKPOINTS = Path.home() / ".spark_log" / "checkpoints"
OUTPUT_TOPIC_CONFIG = {"cleanup.policy": "compact"}


def parser() -> argparse.ArgumentParser:
    p = new_parser("stream_etl.py", __doc__)
    p.add_argument("--topic", default=DEFAULT_TOPIC, help="topic of click events to read")
    p.add_argument("--output-topic", default=DEFAULT_OUTPUT,
                   help="topic the window statistics are written to")
    p.add_argument("--checkpoint", type=Path,
                   help="checkpoint directory (default: ~/.spark_log/checkpoints/"
                        "stream_etl-TOPIC-OUTPUT_TOPIC)")
    p.add_argument("--window", default="1 minute", help="length of the event-time windows")
    p.add_argument("--watermark", default="2 minutes",
                   help="how late an event may be (behind the latest event time seen) and "
                        "still be counted")
    p.add_argument("--output-mode", choices=("append", "update"), default="append",
                   help="append: a window is written once, when the watermark passes its end; "
                        "update: rewritten whenever it changes")
    trigger = p.add_mutually_exclusive_group()
    trigger.add_argument("--available-now", action="store_true",
                         help="process every record present at the start, then stop")
    trigger.add_argument("--processing-time", default="10 seconds", metavar="INTERVAL",
                         help="micro-batch interval of a continuous run")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop a continuous run after this long (default: run until Ctrl-C)")
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new query starts: earliest, latest or offsets JSON")
    p.add_argument("--max-offsets-per-trigger", type=int, metavar="N",
                   help="at most N records per micro-batch")
    p.add_argument("--group-id", help="consumer group the query's progress is committed to, "
                                      "for lag monitoring (default: stream_etl.OUTPUT_TOPIC)")
    p.add_argument("--query-name", help="streaming query name (default: the output topic)")
    delivery = p.add_mutually_exclusive_group()
    delivery.add_argument("--exactly-once", dest="at_least_once", action="store_false",
                          help="the default in append mode: each micro-batch is written in "
                               "transactions that also commit the source group's offsets "
                               "(read-process-write), so a replayed micro-batch does not write "
                               "its records twice (update mode writes through foreachBatch, at "
                               "least once)")
    delivery.add_argument("--at-least-once", dest="at_least_once", action="store_true",
                          help="plain idempotent writes (pylog's exactlyOnce=false); a replayed "
                               "micro-batch is written again")
    p.set_defaults(at_least_once=False)
    p.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other pylog source option (repeatable)")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other pylog sink option (repeatable)")
    cluster.add_arguments(p)
    spark_session.add_arguments(p)
    return p


def checkpoint_dir(args: argparse.Namespace) -> Path:
    if args.checkpoint is not None:
        return Path(args.checkpoint)
    return CHECKPOINTS / f"stream_etl-{args.topic}-{args.output_topic}"


def exactly_once(args: argparse.Namespace) -> bool:
    """Transactional writes need pylog's streaming sink: append mode only."""
    return not args.at_least_once and args.output_mode == "append"


def group_id(args: argparse.Namespace) -> str:
    return args.group_id or f"stream_etl.{args.output_topic}"


def source_options(args: argparse.Namespace, bootstrap: str) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": args.topic,
               "startingOffsets": args.starting_offsets, "groupId": group_id(args)}
    if exactly_once(args):
        # The sink commits the group's offsets inside each micro-batch's transactions.
        options["commitOffsets"] = "transactional"
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    options.update(key_values(args.source_option, "--source-option"))
    return options


def sink_options(args: argparse.Namespace, bootstrap: str) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": bootstrap, "topic": args.output_topic}
    if exactly_once(args):
        options.update(exactlyOnce="true", sourceGroupId=group_id(args))
    else:
        options["exactlyOnce"] = "false"
    options.update(key_values(args.sink_option, "--sink-option"))
    return options


def start(spark: Any, args: argparse.Namespace, bootstrap: str) -> Any:
    """Start the query (not waiting for it)."""
    raw = spark.readStream.format("pylog").options(**source_options(args, bootstrap)).load()
    stats = window_stats.aggregate(window_stats.parse_events(raw), args.window, args.watermark)
    writer = (window_stats.to_records(stats).writeStream.queryName(query_name(args))
              .outputMode(args.output_mode)
              .option("checkpointLocation", str(checkpoint_dir(args))))
    sink = sink_options(args, bootstrap)
    if args.output_mode == "append":
        writer = writer.format("pylog").options(**sink)
    else:
        writer = writer.foreachBatch(batch_writer(sink))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.processing_time)
    return writer.start()


def batch_writer(sink: dict[str, str]) -> Callable[[Any, int], None]:
    """foreachBatch function: append one micro-batch's rows to the topic (pylog batch write)."""

    def write(batch: Any, batch_id: int) -> None:
        batch.write.format("pylog").options(**sink).mode("append").save()

    return write


def query_name(args: argparse.Namespace) -> str:
    return args.query_name or args.output_topic.replace("-", "_")


def await_end(query: Any, args: argparse.Namespace) -> None:
    """Until an AvailableNow run ends, --timeout passes or Ctrl-C; a failed query raises."""
    try:
        if args.available_now or args.timeout is None:
            query.awaitTermination()
        elif not query.awaitTermination(args.timeout):
            say(f"--timeout {args.timeout:g}s reached: stopping the query")
    except KeyboardInterrupt:
        say("interrupted: stopping the query (it resumes from its checkpoint next time)")
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")


def run(args: argparse.Namespace, spark: Any) -> Any:
    """Run the job in `spark`; returns the stopped query (its recentProgress tells what ran)."""
    bootstrap = cluster.resolve(args)
    cluster.require_topic(bootstrap, args.topic)
    cluster.ensure_topic(bootstrap, args.output_topic, 1, OUTPUT_TOPIC_CONFIG)
    trigger = "available now" if args.available_now else f"every {args.processing_time}"
    say(f"streaming {args.topic} -> {args.output_topic}: {args.window} windows, watermark "
        f"{args.watermark}, {args.output_mode} mode, "
        f"{'exactly' if exactly_once(args) else 'at least'} once, trigger {trigger}, checkpoint "
        f"{checkpoint_dir(args)}")
    name = query_name(args)
    with progress.reported(spark, name):
        query = start(spark, args, bootstrap)
        await_end(query, args)
    done = progress.totals(query)
    dropped = ", late data dropped by the watermark" if done.dropped else ""
    say(f"query {name} stopped: {done.rows_in} rows in {done.batches} micro-batches{dropped}")
    return query


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    args.bootstrap_server = cluster.resolve(args)  # a missing sidecar starts before Spark does
    with spark_session.running("stream_etl", args.master, args.shuffle_partitions) as spark:
        run(args, spark)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_reporting("stream_etl", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
