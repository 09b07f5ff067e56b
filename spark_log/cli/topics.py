"""`spark-log topics list|create|describe|delete|alter`, the flags of kafka-topics.sh (and of
kafka-configs.sh for `alter --config/--delete-config`), through confluent-kafka's AdminClient.
`describe` lives in `topics_describe`.
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from .arguments import key_values
from .connect import (
    add_connection_arguments,
    connect,
    partition_count,
    topic_names,
    unknown_topic,
    wait,
)
from .errors import CliError, UsageError, error_name
from .output import print_json
from .topics_describe import add_describe_parser

# Kafka's tool refuses to change these: ids hash onto their partitions.
FIXED_PARTITION_COUNT = frozenset({"__consumer_offsets", "__transaction_state"})


def add_topics_parser(commands: Any) -> None:
    topics = commands.add_parser("topics", help="list, create, describe, alter and delete topics",
                                 description="Manage topics, like kafka-topics.sh.")
    actions = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    _add_list(actions)
    _add_create(actions)
    add_describe_parser(actions)
    _add_alter(actions)
    _add_delete(actions)


def _add_list(actions: Any) -> None:
    p = actions.add_parser("list", help="topic names, one per line")
    p.add_argument("--exclude-internal", action="store_true",
                   help="leave out internal topics (__consumer_offsets ...)")
    p.add_argument("--json", action="store_true", help="a JSON array with partition counts")
    add_connection_arguments(p)
    p.set_defaults(run=_list)


def _add_create(actions: Any) -> None:
    p = actions.add_parser("create", help="create a topic")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, default=-1,
                   help="partition count (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas per partition (default: the broker's default)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config override, e.g. cleanup.policy=compact (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="succeed quietly when the topic exists")
    add_connection_arguments(p)
    p.set_defaults(run=_create)


def _add_alter(actions: Any) -> None:
    p = actions.add_parser("alter", help="add partitions or change a topic's configs")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, help="the new, larger, partition count")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config override (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove a config override, back to the default (repeatable)")
    add_connection_arguments(p)
    p.set_defaults(run=_alter)


def _add_delete(actions: Any) -> None:
    p = actions.add_parser("delete", help="delete a topic and its data")
    p.add_argument("--topic", required=True, action="append",
                   help="topic to delete (repeatable)")
    p.add_argument("--if-exists", action="store_true", help="succeed quietly when it is absent")
    add_connection_arguments(p)
    p.set_defaults(run=_delete)


def _list(args: argparse.Namespace) -> int:
    admin = connect(args).admin()
    names = topic_names(admin, include_internal=not args.exclude_internal)
    if args.json:
        metadata = admin.list_topics(timeout=30).topics
        print_json([{"name": n, "partitions": len(metadata[n].partitions),
                     "internal": n.startswith("__")} for n in names])
    else:
        for name in names:
            print(name)
    return 0


def _create(args: argparse.Namespace) -> int:
    configs = key_values(args.config, "--config")
    admin = connect(args).admin()
    new = NewTopic(args.topic, num_partitions=args.partitions,
                   replication_factor=args.replication_factor, config=configs)
    future = admin.create_topics([new], operation_timeout=30)[args.topic]
    try:
        future.result(timeout=60)
    except Exception as exc:
        if args.if_not_exists and error_name(exc) == "TOPIC_ALREADY_EXISTS":
            return 0
        wait(future, f"creating topic {args.topic!r}")
    print(f"Created topic {args.topic}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = connect(args).admin()
    existing = set(topic_names(admin))
    missing = [t for t in args.topic if t not in existing]
    if missing and not args.if_exists:
        raise unknown_topic(missing[0])
    wanted = [t for t in args.topic if t in existing]
    if not wanted:
        return 0
    for topic, future in admin.delete_topics(wanted, operation_timeout=30).items():
        wait(future, f"deleting topic {topic!r}")
        print(f"Deleted topic {topic}.")
    return 0


def _alter(args: argparse.Namespace) -> int:
    sets = key_values(args.config, "--config")
    if args.partitions is None and not sets and not args.delete_config:
        raise UsageError("topics alter needs --partitions, --config or --delete-config")
    if args.partitions is not None and args.topic in FIXED_PARTITION_COUNT:
        raise CliError(f"the number of partitions of {args.topic} cannot be changed: "
                       "coordinators find a group's or a transactional id's partition by it")
    admin = connect(args).admin()
    current = partition_count(admin, args.topic)
    if args.partitions is not None:
        _add_partitions(admin, args.topic, current, args.partitions)
    if sets or args.delete_config:
        _alter_configs(admin, args.topic, sets, args.delete_config)
    return 0


def _add_partitions(admin: Any, topic: str, current: int, wanted: int) -> None:
    if wanted <= current:
        raise UsageError(f"--partitions {wanted}: topic {topic!r} has {current} partition(s); "
                         "partitions can only be added")
    future = admin.create_partitions([NewPartitions(topic, wanted)],
                                     operation_timeout=30)[topic]
    wait(future, f"adding partitions to {topic!r}")
    print(f"Topic {topic} now has {wanted} partitions (was {current}).")


def _alter_configs(admin: Any, topic: str, sets: dict[str, str], deletes: list[str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in sets.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        wait(future, f"altering the configs of {topic!r}")
    changes = [f"{k}={v}" for k, v in sets.items()] + [f"-{k}" for k in deletes]
    print(f"Altered the configs of topic {topic}: {', '.join(changes)}.")
