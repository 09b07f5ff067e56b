"""`spark-log topics describe`: a topic's partitions (leader, replicas, ISR), their log start
and end offsets and sizes, and the topic's non-default configs.

Partitions and configs come from Metadata and DescribeConfigs, offsets from ListOffsets, sizes
from DescribeLogDirs (shown as '-' by a broker that does not answer it).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec

from .connect import Connection, add_connection_arguments, connect, topic_names, unknown_topic
from .connect import wait as wait_for
from .output import print_json, print_table

HEADERS = ("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET",
           "SIZE")


@dataclass
class PartitionView:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    size_bytes: int | None = None


@dataclass
class TopicView:
    name: str
    topic_id: str | None
    internal: bool
    replication_factor: int
    configs: dict[str, str]
    partitions: list[PartitionView] = field(default_factory=list)


def add_describe_parser(actions: Any) -> None:
    p = actions.add_parser("describe", help="partitions, offsets, sizes and configs of topics")
    p.add_argument("--topic", action="append", default=[],
                   help="topic to describe (repeatable; default: every topic)")
    p.add_argument("--exclude-internal", action="store_true",
                   help="leave out internal topics when describing every topic")
    p.add_argument("--json", action="store_true", help="one JSON array of topics")
    add_connection_arguments(p)
    p.set_defaults(run=_describe)


def _describe(args: argparse.Namespace) -> int:
    connection = connect(args)
    admin = connection.admin()
    existing = topic_names(admin, include_internal=bool(args.topic) or not args.exclude_internal)
    for topic in args.topic:
        if topic not in existing:
            raise unknown_topic(topic)
    views = describe_topics(connection, admin, args.topic or existing)
    if args.json:
        print_json([asdict(v) for v in views])
    else:
        for i, view in enumerate(views):
            if i:
                print()
            _print_topic(view)
    return 0


def describe_topics(connection: Connection, admin: Any, names: list[str]) -> list[TopicView]:
    cluster = admin.list_topics(timeout=30)
    metadata = cluster.topics
    ids = _topic_ids(admin, names)
    views = [_topic_view(metadata[n], ids.get(n), _overrides(admin, n)) for n in names]
    _fill_offsets(admin, views)
    from spark_log.client.log_dirs import partition_sizes  # loads the protocol codecs

    brokers = [f"{b.host}:{b.port}" for b in cluster.brokers.values()]
    sizes = partition_sizes(brokers or connection.bootstrap, names)
    for view in views:
        for p in view.partitions:
            p.size_bytes = sizes.get((view.name, p.partition))
    return views


def _topic_ids(admin: Any, names: list[str]) -> dict[str, str]:
    ids = {}
    for name, future in admin.describe_topics(TopicCollection(names)).items():
        description = wait_for(future, f"describing topic {name!r}")
        # Kafka prints topic ids in URL-safe base64.
        topic_id = description.topic_id
        ids[name] = None if topic_id is None else str(topic_id).replace("+", "-").replace(
            "/", "_")
    return ids


def _overrides(admin: Any, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = wait_for(admin.describe_configs([resource])[resource],
                       f"describing the configs of {topic!r}")
    return {name: entry.value for name, entry in sorted(configs.items())
            if not entry.is_default and entry.source == _DYNAMIC_TOPIC_CONFIG}


_DYNAMIC_TOPIC_CONFIG = 1


def _topic_view(meta: Any, topic_id: str | None, configs: dict[str, str]) -> TopicView:
    partitions = [PartitionView(p.id, p.leader, list(p.replicas), list(p.isrs))
                  for p in sorted(meta.partitions.values(), key=lambda p: p.id)]
    factor = len(partitions[0].replicas) if partitions else 0
    return TopicView(meta.topic, topic_id, meta.topic.startswith("__"), factor, configs,
                     partitions)


def _fill_offsets(admin: Any, views: list[TopicView]) -> None:
    by_tp = {(v.name, p.partition): p for v in views for p in v.partitions}
    if not by_tp:
        return
    for spec, attr in ((OffsetSpec.earliest(), "log_start_offset"),
                       (OffsetSpec.latest(), "log_end_offset")):
        request = {TopicPartition(t, p): spec for t, p in by_tp}
        for tp, future in admin.list_offsets(request).items():
            info = wait_for(future, f"listing offsets of {tp.topic}-{tp.partition}")
            setattr(by_tp[(tp.topic, tp.partition)], attr, info.offset)


def _print_topic(view: TopicView) -> None:
    configs = ",".join(f"{k}={v}" for k, v in view.configs.items())
    print(f"Topic: {view.name}\tTopicId: {view.topic_id or '-'}\t"
          f"PartitionCount: {len(view.partitions)}\tReplicationFactor: "
          f"{view.replication_factor}\tConfigs: {configs}")
    rows = [(p.partition, p.leader, _ids(p.replicas), _ids(p.isr), p.log_start_offset,
             p.log_end_offset, p.size_bytes) for p in view.partitions]
    print_table(HEADERS, rows)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)
