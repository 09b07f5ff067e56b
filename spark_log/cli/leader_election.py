"""`spark-log leader-election`: elect partition leaders with the flags and output of
kafka-leader-election.sh, through confluent-kafka's AdminClient.elect_leaders (ElectLeaders,
which the broker forwards to the active controller).

PREFERRED makes each partition's first replica its leader where that replica is in sync and
alive; UNCLEAN gives a partition without a leader any live replica, even one outside the ISR —
records it did not have are lost (the controller logs it as such). The partitions are one
(`--topic` with `--partition`), those of a JSON file (`--path-to-json-file`), or every
partition (`--all-topic-partitions`, where partitions needing no election are left out).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, KafkaError, TopicPartition

from .connect import add_connection_arguments, connect, topic_names, unknown_topic, wait
from .errors import CliError, UsageError
from .reassignment_json import read_election_partitions

ELECTION_TIMEOUT_S = 60.0


def add_leader_election_parser(commands: Any) -> None:
    p = commands.add_parser(
        "leader-election", help="elect preferred or unclean partition leaders",
        description="Elect partition leaders, like kafka-leader-election.sh: --election-type, "
                    "and exactly one of --topic/--partition, --all-topic-partitions, "
                    "--path-to-json-file.")
    p.add_argument("--election-type", required=True, type=_election_type,
                   metavar="PREFERRED|UNCLEAN",
                   help="preferred: the first replica leads where it is in sync; unclean: a "
                        "partition without a leader takes any live replica (may lose data)")
    p.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    p.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition of the cluster")
    p.add_argument("--path-to-json-file", type=Path, metavar="FILE",
                   help='{"partitions":[{"topic":"t","partition":0}]}')
    add_connection_arguments(p)
    p.set_defaults(run=_run)


def _election_type(text: str) -> ElectionType:
    try:
        return ElectionType[text.strip().upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"expected PREFERRED or UNCLEAN, got {text!r}") from None


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions to elect, None for all of them."""
    chosen = [flag for flag, given in (("--topic", args.topic is not None),
                                       ("--all-topic-partitions", args.all_topic_partitions),
                                       ("--path-to-json-file", args.path_to_json_file is not None))
              if given]
    if len(chosen) != 1:
        raise UsageError("One and only one of the following options is required: --topic, "
                         "--all-topic-partitions, --path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise UsageError("--topic needs --partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option --partition is only allowed if --topic is used")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [(args.topic, args.partition)]
    return read_election_partitions(args.path_to_json_file)


def _run(args: argparse.Namespace) -> int:
    wanted = _partitions(args)
    admin = connect(args).admin()
    if wanted is not None:
        existing = set(topic_names(admin))
        missing = next((topic for topic, _ in wanted if topic not in existing), None)
        if missing is not None:
            raise unknown_topic(missing)
    partitions = None if wanted is None else [TopicPartition(t, p) for t, p in wanted]
    # No timeout keywords: confluent-kafka 2.16's elect_leaders fails on any of them.
    future = admin.elect_leaders(args.election_type, partitions)
    results = wait(future, "electing leaders", ELECTION_TIMEOUT_S + 5)
    return _report(args.election_type.name, results)


def _report(election: str, results: dict[Any, Any]) -> int:
    succeeded, not_needed, failed = [], [], []
    for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
        error = _error(results[tp])
        name = f"{tp.topic}-{tp.partition}"
        if error is None:
            succeeded.append(name)
        elif isinstance(error, KafkaError) and error.code() == KafkaError.ELECTION_NOT_NEEDED:
            not_needed.append(name)
        else:
            failed.append((name, error))
    if succeeded:
        print(f"Successfully completed leader election ({election}) for partitions "
              f"{', '.join(succeeded)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for name, error in failed:
        text = f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(error)
        print(f"Error completing leader election ({election}) for partition: {name}: {text}")
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected")
    return 0


def _error(outcome: Any) -> Any:
    """A partition's outcome as a KafkaError where it has one (None: elected)."""
    if outcome is None:
        return None
    inner = outcome.args[0] if isinstance(outcome, Exception) and outcome.args else outcome
    return inner if isinstance(inner, KafkaError) else outcome
