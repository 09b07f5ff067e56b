"""The spark_log demo (`./dev demo`): a clickstream through a streaming PySpark job on the
embedded broker, in about a minute, with nothing to set up but Python and Java.

1. starts (or reuses) the sidecar broker of --data-dir and resets the demo topics;
2. produces --duration seconds of click events at --rate per second (generate_events), some
   of them late and out of order, while
3. a streaming query (stream_etl) reads them with pylog, counts them in event-time windows with
   a watermark and writes each window, once final, to the results topic with pylog's
   exactly-once sink (transactions; --at-least-once for the plain idempotent producer);
4. prints the results table, read back from that topic with a pylog batch query.

The sidecar keeps running afterwards (explore the topics with `spark-log` or the notebook);
--stop-sidecar stops it. Each run starts over: topics recreated, a fresh checkpoint. Exits 0
when the table is printed, 1 with the reason when a step fails.

    ./dev demo
    python jobs/demo.py --rate 100 --duration 60 --window "10 seconds" --stop-sidecar
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python jobs/demo.py`: make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs import cluster, generate_events, progress, spark_session, stream_etl, window_stats
from jobs.arguments import new_parser
from jobs.console import failure, say, table
from jobs.events import StreamSpec, synthesize
from spark_log import sidecar

DEFAULT_DATA_DIR = Path.home() / ".spark_log" / "demo"
GENERATOR_GRACE_S = 120.0


def parser() -> argparse.ArgumentParser:
    p = new_parser("demo.py", __doc__)
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                   help="data directory of the demo's sidecar broker")
    p.add_argument("--topic", default="clicks", help="topic of click events (recreated)")
    p.add_argument("--output-topic", default="click-stats",
                   help="topic of window statistics (recreated)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the events topic")
    p.add_argument("--rate", type=float, default=40.0, help="events per second")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of events")
    p.add_argument("--window", default="5 seconds", help="event-time window length")
    p.add_argument("--watermark", default="5 seconds",
                   help="how late an event may be and still be counted")
    p.add_argument("--max-lateness", type=float, default=15.0, metavar="SECONDS",
                   help="how late the generator's late events can be")
    p.add_argument("--processing-time", default="3 seconds", metavar="INTERVAL",
                   help="micro-batch interval")
    p.add_argument("--seed", type=int, help="random seed of the events (default: random)")
    p.add_argument("--at-least-once", action="store_true",
                   help="write results with an idempotent producer instead of transactions "
                        "(pylog's exactlyOnce=false)")
    p.add_argument("--stop-sidecar", action="store_true",
                   help="stop the sidecar broker at the end instead of leaving it running")
    p.add_argument("--master", default="local[2]", help="Spark master URL")
    return p


def delete_topics(bootstrap: str, topics: list[str], timeout_s: float = 60.0) -> None:
    """Delete those of `topics` that exist, and wait until they are gone."""
    admin = cluster.admin_client(bootstrap)
    existing = [t for t in topics if t in admin.list_topics(timeout=30).topics]
    if not existing:
        return
    for future in admin.delete_topics(existing).values():
        future.result(30)
    deadline = time.monotonic() + timeout_s
    while any(t in admin.list_topics(timeout=30).topics for t in existing):
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {existing} were not deleted within {timeout_s:.0f}s")
        time.sleep(0.1)


def reset_topics(bootstrap: str, args: argparse.Namespace) -> None:
    """The demo's topics, empty: events with --partitions, results compacted."""
    delete_topics(bootstrap, [args.topic, args.output_topic])
    cluster.ensure_topic(bootstrap, args.topic, args.partitions)
    cluster.ensure_topic(bootstrap, args.output_topic, 1, stream_etl.OUTPUT_TOPIC_CONFIG)
    say(f"topics {args.topic} ({args.partitions} partitions) and {args.output_topic} "
        "(compacted) created empty")


def etl_arguments(args: argparse.Namespace, bootstrap: str, checkpoint: Path
                  ) -> argparse.Namespace:
    """The stream_etl arguments the demo runs with."""
    delivery = ["--at-least-once"] if args.at_least_once else ["--exactly-once"]
    return stream_etl.parser().parse_args([
        "--topic", args.topic, "--output-topic", args.output_topic,
        "--window", args.window, "--watermark", args.watermark,
        "--processing-time", args.processing_time, "--checkpoint", str(checkpoint),
        "--bootstrap-server", bootstrap, "--group-id", f"demo.{args.output_topic}", *delivery])


def start_generator(args: argparse.Namespace, bootstrap: str, stop: threading.Event
                    ) -> tuple[threading.Thread, dict[str, Any]]:
    """Produce the events on a thread; the dict gets `result` (or `error`) when it ends."""
    spec = generate_events.spec_from(argparse.Namespace(
        rate=args.rate, duration=args.duration, count=None, seed=args.seed, start_time=None,
        users=200, late_fraction=0.05, max_lateness=args.max_lateness))
    outcome: dict[str, Any] = {"spec": spec}

    def produce() -> None:
        try:
            outcome["result"] = generate_events.produce(
                bootstrap, args.topic, synthesize(spec), rate=spec.rate, stop=stop,
                seed=spec.seed, on_progress=lambda n: say(f"generator: {n}/{spec.count} "
                                                         f"events produced"))
        except Exception as exc:  # reported by the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=produce, name="generate_events", daemon=True)
    thread.start()
    say(f"generator: producing {spec.count} click events to {args.topic} at {spec.rate:g}/s "
        f"for {args.duration:g}s (seed {spec.seed}), some late and out of order")
    return thread, outcome


def await_generator(thread: threading.Thread, outcome: dict[str, Any], query: Any,
                    spec: StreamSpec) -> None:
    """Until the generator is done; fails early if the query dies."""
    deadline = time.monotonic() + spec.count / spec.rate + GENERATOR_GRACE_S
    while thread.is_alive():
        if not query.isActive:
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError("the generator did not finish in time")
        thread.join(timeout=0.5)
    if "error" in outcome:
        raise RuntimeError(f"the generator failed: {outcome['error']}")


def results_table(spark: Any, bootstrap: str, topic: str) -> Any:
    """The results topic as a pandas DataFrame: one row per window, times as HH:MM:SS."""
    frame = window_stats.read_latest(spark, {"kafka.bootstrap.servers": bootstrap},
                                     topic).toPandas()
    for column in ("window_start", "window_end"):
        frame[column] = frame[column].dt.strftime("%H:%M:%S")
    return frame


def report(frame: Any, produced: int, totals: progress.Totals, args: argparse.Namespace,
           bootstrap: str) -> None:
    counted = int(frame["events"].sum()) if not frame.empty else 0
    print(f"\nWindow statistics read back from topic {args.output_topic} (UTC, "
          f"{args.window} windows):\n", flush=True)
    print(table(frame), flush=True)
    late = ("some arrived after the watermark and were dropped, the others are"
            if totals.dropped else "all are")
    print(f"\n{produced} events produced, {counted} counted in {len(frame)} final windows. Of "
          f"the other {produced - counted}, {late} in windows still open: the watermark "
          f"({totals.watermark or '-'}) has not passed their end; a running query writes them "
          "once later events move it on.", flush=True)
    tool = spark_log_command()
    print(f"\nBroker: {bootstrap} (data dir {args.data_dir}). Try:\n"
          f"  {tool} topics describe --data-dir {args.data_dir} --topic {args.topic}\n"
          f"  {tool} consume --data-dir {args.data_dir} --topic {args.output_topic} "
          "--from-beginning --isolation-level read_committed --property print.key=true "
          "--timeout-ms 2000\n", flush=True)


def spark_log_command() -> str:
    """How to call the `spark-log` CLI of this interpreter from the current directory."""
    beside = Path(sys.executable).parent / "spark-log"
    if shutil.which("spark-log") == str(beside) or not beside.exists():
        return "spark-log"
    with contextlib.suppress(ValueError):
        return str(beside.relative_to(Path.cwd()))
    return str(beside)


def run(args: argparse.Namespace) -> int:
    say(f"sidecar broker: data dir {args.data_dir}")
    was_running = sidecar.find(args.data_dir) is not None
    bootstrap = sidecar.ensure_running(args.data_dir)
    say(f"sidecar broker: {'reusing' if was_running else 'started'} {bootstrap}")
    reset_topics(bootstrap, args)
    try:
        run_spark(args, bootstrap)
    finally:
        finish_sidecar(args)
    return 0


def run_spark(args: argparse.Namespace, bootstrap: str) -> None:
    """The Spark part: the streaming query, then the results table (printed before the
    session stops, which takes a few seconds)."""
    say(f"spark: starting a local session ({args.master})")
    with (spark_session.running("spark_log-demo", args.master) as spark,
          tempfile.TemporaryDirectory(prefix="spark_log-demo-") as checkpoint):
        query, produced = run_stream(spark, args, bootstrap, Path(checkpoint))
        say(f"reading the results back from {args.output_topic} (pylog batch query)")
        frame = results_table(spark, bootstrap, args.output_topic)
        report(frame, produced, progress.totals(query), args, bootstrap)


def run_stream(spark: Any, args: argparse.Namespace, bootstrap: str, checkpoint: Path
               ) -> tuple[Any, int]:
    """Start the query, produce the events, let the query catch up and stop it: (the stopped
    query, the number of events produced)."""
    etl = etl_arguments(args, bootstrap, checkpoint)
    name = stream_etl.query_name(etl)
    delivery = "at least once" if args.at_least_once else "exactly once"
    say(f"streaming query {name}: {etl.topic} -> {etl.window} windows, watermark "
        f"{etl.watermark} -> {etl.output_topic} ({delivery}), a micro-batch every "
        f"{etl.processing_time} (the first one also starts Spark's Python workers)")
    stop = threading.Event()
    with progress.reported(spark, name):
        query = stream_etl.start(spark, etl, bootstrap)
        try:
            thread, outcome = start_generator(args, bootstrap, stop)
            await_generator(thread, outcome, query, outcome["spec"])
            say("generator: done; the query catches up with the last events")
            query.processAllAvailable()
        finally:
            stop.set()
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return query, outcome["result"].count


def finish_sidecar(args: argparse.Namespace) -> None:
    if args.stop_sidecar:
        sidecar.stop(args.data_dir)
        say("sidecar broker stopped")
    else:
        say(f"the sidecar broker keeps running; stop it with: {spark_log_command()} sidecar "
            f"stop --data-dir {args.data_dir}  (or run the demo with --stop-sidecar)")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Exception as exc:  # the reason, not a traceback (Spark's run to pages)
        say(f"demo failed: {failure(exc)}")
        log = sidecar.resolve_data_dir(args.data_dir) / sidecar.LOG_FILE
        say(f"the sidecar broker's log: {log}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
