"""The `spark-log` command: one subcommand per tool, with the flags of Kafka's own tools.

Command families register themselves from their modules (`broker` runs a broker in the
foreground; `topics`, `produce`, `consume`, `groups`, `dump-log`, `perf`, `sidecar`, `storage`,
`cluster`, `metadata-quorum`, `reassign-partitions` and `leader-election` are the tools). Every
failure is one `error:` line on stderr: a bad flag exits 2 (argparse's convention), a failing
command 1, Ctrl-C 130.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from confluent_kafka import KafkaException

from spark_log import __version__
from spark_log.broker.launch_options import add_broker_arguments

from .cluster import add_cluster_parser
from .consume import add_consume_parser
from .dump_log import add_dump_log_parser
from .errors import EXIT_FAILURE, EXIT_USAGE, CliError, kafka_error_text
from .groups import add_groups_parser
from .leader_election import add_leader_election_parser
from .metadata_quorum import add_metadata_quorum_parser
from .perf import add_perf_parser
from .produce import add_produce_parser
from .reassign_partitions import add_reassign_partitions_parser
from .sidecar_command import add_sidecar_parser
from .storage_command import add_storage_parser
from .topics import add_topics_parser

EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one `error:` line pointing at --help (subcommands inherit
    the class), like every other failure of the tool."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spark-log", description="A Kafka-compatible event log, and the tools around it.")
    parser.add_argument("--version", action="version", version=f"spark-log {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker = commands.add_parser("broker", help="run a broker in the foreground",
                                 description="Run a spark_log broker in the foreground, "
                                             "logging to stderr; SIGTERM or SIGINT stops it "
                                             "cleanly.")
    add_broker_arguments(broker)
    broker.set_defaults(run=_run_broker)
    add_topics_parser(commands)
    add_produce_parser(commands)
    add_consume_parser(commands)
    add_groups_parser(commands)
    add_dump_log_parser(commands)
    add_perf_parser(commands)
    add_sidecar_parser(commands)
    add_storage_parser(commands)
    add_cluster_parser(commands)
    add_metadata_quorum_parser(commands)
    add_reassign_partitions_parser(commands)
    add_leader_election_parser(commands)
    return parser


def _run_broker(args: argparse.Namespace) -> int:
    from spark_log.broker.__main__ import run  # the broker's modules load only for `broker`

    return run(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except CliError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KafkaException as exc:
        print(f"error: {kafka_error_text(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        sys.stderr.close()  # a reader such as `head` went away: not an error
        return 0


if __name__ == "__main__":
    sys.exit(main())
