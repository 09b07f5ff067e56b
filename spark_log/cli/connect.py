"""Where a command's broker is, and the confluent-kafka clients that talk to it.

`--bootstrap-server host:port[,host:port]` names a broker as Kafka's tools do; without it a
command uses the embedded sidecar broker of the data directory (`--data-dir`, else
$SPARK_LOG_DATA_DIR, else ~/.spark_log/data), starting it when none runs. A bootstrap address
is tried with a plain TCP connect first, so an unreachable broker is one clear error naming
the addresses tried instead of librdkafka's retry loop. `--command-config FILE` adds client
properties (Kafka's names) to every client a command creates.
"""

from __future__ import annotations

import argparse
import logging
import socket
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from spark_log import sidecar
from spark_log.properties import ConfigError, read_properties_file

from .errors import CliError, UsageError, from_kafka
from .output import notice
from .sidecar_command import sidecar_errors

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
CLIENT_ID = "spark-log-cli"
T = TypeVar("T")

_librdkafka_log = logging.getLogger("spark_log.cli.librdkafka")
_librdkafka_log.addHandler(logging.NullHandler())
_librdkafka_log.propagate = False


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT",
                       help="broker(s) to connect to; default: the embedded sidecar broker")
    group.add_argument("--data-dir", type=Path, default=None,
                       help="data directory of the sidecar broker (default $SPARK_LOG_DATA_DIR "
                            "or ~/.spark_log/data); used without --bootstrap-server")
    group.add_argument("--command-config", type=Path, metavar="FILE",
                       help="a properties file of client settings (Kafka's names)")


class Connection:
    """The broker address of one command run and the client settings to reach it."""

    def __init__(self, bootstrap: str, settings: Mapping[str, str]) -> None:
        self.bootstrap = bootstrap
        self.settings = dict(settings)

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "client.id": CLIENT_ID,
                "logger": _librdkafka_log, **self.settings, **extra}

    def admin(self) -> AdminClient:
        return _client(AdminClient, "admin client", self.config())

    def producer(self, **extra: Any) -> Producer:
        return _client(Producer, "producer", self.config(**extra))

    def consumer(self, **extra: Any) -> Consumer:
        return _client(Consumer, "consumer", self.config(**extra))


def _client(kind: Callable[[dict[str, Any]], T], what: str, config: dict[str, Any]) -> T:
    """A client of `kind`; a setting librdkafka refuses is a usage error naming it."""
    try:
        return kind(config)
    except KafkaException as exc:
        raise UsageError(f"{what} settings: {exc.args[0].str() if exc.args else exc}") from None


def connect(args: argparse.Namespace) -> Connection:
    """The broker for this command: --bootstrap-server (checked reachable) or the sidecar."""
    settings = _command_config(getattr(args, "command_config", None))
    if args.bootstrap_server:
        check_reachable(args.bootstrap_server)
        return Connection(args.bootstrap_server, settings)
    return Connection(sidecar_address(args.data_dir), settings)


def sidecar_address(data_dir: Path | None) -> str:
    with sidecar_errors(data_dir):
        address = sidecar.find(data_dir)
        if address is not None:
            return address
        address = sidecar.ensure_running(data_dir)
    notice(f"Started the sidecar broker at {address} "
           f"(data dir {sidecar.resolve_data_dir(data_dir)}); stop it with "
           "`spark-log sidecar stop`.")
    return address


def _command_config(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    if not path.is_file():
        raise UsageError(f"--command-config {path}: no such file")
    try:
        return read_properties_file(path)
    except (ConfigError, OSError, ValueError) as exc:
        raise UsageError(f"--command-config {path}: {exc}") from None


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` (optionally `PLAINTEXT://host:port`, `[::1]:port`) -> (host, port)."""
    text = address.strip().rpartition("://")[2]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--bootstrap-server: expected HOST:PORT (port 1-65535), got "
                         f"{address!r}")
    return host.strip("[]"), int(port)


def check_reachable(bootstrap: str) -> None:
    """Raise CliError unless at least one of the bootstrap addresses accepts a connection."""
    failures = []
    for address in [a for a in bootstrap.split(",") if a.strip()]:
        host, port = parse_address(address)
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            return
        except OSError as exc:
            failures.append(f"{host}:{port} ({exc.strerror or exc})")
    tried = ", ".join(failures) or repr(bootstrap)
    raise CliError(f"cannot reach a broker at {tried}")


def wait(future: Future[T], what: str, timeout_s: float = REQUEST_TIMEOUT_S) -> T:
    """The result of an admin future; a broker's refusal becomes a CliError naming `what`."""
    try:
        return future.result(timeout=timeout_s)
    except KafkaException as exc:
        raise from_kafka(what, exc) from None
    except TimeoutError:
        raise CliError(f"{what}: no answer within {timeout_s:.0f}s") from None


def topic_names(admin: AdminClient, include_internal: bool = True) -> list[str]:
    """Every topic of the cluster (listing all topics never auto-creates one)."""
    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise from_kafka("listing topics", exc) from None
    names = sorted(metadata.topics)
    return names if include_internal else [n for n in names if not n.startswith("__")]


def partition_count(admin: AdminClient, topic: str) -> int:
    """The partition count of `topic`; CliError if the topic does not exist."""
    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise from_kafka("listing topics", exc) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise unknown_topic(topic)
    return len(found.partitions)


def unknown_topic(topic: str) -> CliError:
    return CliError(f"topic {topic!r} does not exist (create it with "
                    f"`spark-log topics create --topic {topic}`)")
