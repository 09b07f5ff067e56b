"""A job's Kafka cluster: where it is — `--bootstrap-server`, or else the embedded sidecar
broker of `--data-dir` ($SPARK_LOG_DATA_DIR, else ~/.spark_log/data), started when none runs,
the same broker pylog and the `spark-log` CLI use for that directory — and the topics the jobs
create on it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from spark_log import sidecar

from .console import say

_librdkafka = logging.getLogger("jobs.librdkafka")
_librdkafka.addHandler(logging.NullHandler())
_librdkafka.propagate = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT",
                       help="Kafka cluster to use (host:port[,host:port]); default: the "
                            "embedded sidecar broker of --data-dir")
    group.add_argument("--data-dir", type=Path, default=None,
                       help="data directory of the sidecar broker (default: "
                            "$SPARK_LOG_DATA_DIR, else ~/.spark_log/data); used without "
                            "--bootstrap-server")


def resolve(args: argparse.Namespace) -> str:
    """The bootstrap address: --bootstrap-server, or the sidecar's (started if needed)."""
    if args.bootstrap_server:
        return str(args.bootstrap_server)
    return sidecar_address(args.data_dir)


def sidecar_address(data_dir: Path | None) -> str:
    """The address of the sidecar broker of `data_dir`, saying so when it had to start it."""
    running = sidecar.find(data_dir)
    if running is not None:
        return running
    address = sidecar.ensure_running(data_dir)
    say(f"started the sidecar broker at {address} (data dir {sidecar.resolve_data_dir(data_dir)})")
    return address


def ensure_topic(bootstrap: str, topic: str, partitions: int,
                 config: dict[str, str] | None = None) -> int:
    """Create `topic` (with `partitions` and `config`) unless it exists; its partition count."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = admin_client(bootstrap)
    existing = admin.list_topics(timeout=30).topics.get(topic)
    if existing is not None and existing.error is None:
        return len(existing.partitions)
    try:
        admin.create_topics([NewTopic(topic, partitions, config=config or {})])[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return partitions


def require_topic(bootstrap: str, topic: str) -> None:
    """Exit with a clear message when `topic` does not exist."""
    found = admin_client(bootstrap).list_topics(timeout=30).topics
    if topic not in found or found[topic].error is not None:
        raise SystemExit(f"topic {topic!r} does not exist on {bootstrap}; produce some events "
                         f"first: python jobs/generate_events.py --topic {topic}")


def admin_client(bootstrap: str) -> Any:
    """A confluent-kafka AdminClient whose librdkafka log lines stay out of the job's output."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "logger": _librdkafka})
