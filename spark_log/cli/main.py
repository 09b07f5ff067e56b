"""The `spark-log` command: one subcommand per tool, with the flags of Kafka's own tools.

Subcommands register themselves from their modules (`broker` runs a broker in the foreground);
a bad flag or a failing command prints one clear line to stderr and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys

from spark_log import __version__
from spark_log.broker.__main__ import run as run_broker
from spark_log.broker.launch_options import add_broker_arguments

from .perf import add_perf_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-log", description="A Kafka-compatible event log, and the tools around it.")
    parser.add_argument("--version", action="version", version=f"spark-log {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker = commands.add_parser("broker", help="run a broker in the foreground",
                                 description="Run a spark_log broker in the foreground, "
                                             "logging to stderr; SIGTERM or SIGINT stops it "
                                             "cleanly.")
    add_broker_arguments(broker)
    broker.set_defaults(run=run_broker)
    add_perf_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
