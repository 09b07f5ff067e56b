"""Command-line flags of a broker (`spark-log broker` and `python -m spark_log.broker`).

Flags are shorthands for Kafka settings: `--data-dir` is `log.dirs`, `--host/--port` form
`listeners`, `--broker-id` is `node.id`; anything else goes through `--config key=value`
(repeatable) or `--config-file server.properties`, under Kafka's names. Flags win over the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spark_log.broker.broker_config import BrokerConfig
from spark_log.properties import ConfigError, read_properties_file

DEFAULT_PORT = 9092
DEFAULT_HOST = "127.0.0.1"


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="directory of the log (log.dirs)")
    parser.add_argument("--host", default=None,
                        help=f"address to listen on (default {DEFAULT_HOST}; 0.0.0.0 for all)")
    parser.add_argument("--port", type=int, default=None,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free port)")
    parser.add_argument("--broker-id", type=int, default=None, help="node.id of this broker")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting under its Kafka name, e.g. num.partitions=3")
    parser.add_argument("--config-file", type=Path, default=None,
                        help="a Kafka server.properties file")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on this port (default: off)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")


def config_from_arguments(args: argparse.Namespace) -> BrokerConfig:
    """Merge --config-file, --config and the shorthand flags into one validated config."""
    props: dict[str, str] = {}
    if args.config_file is not None:
        if not args.config_file.is_file():
            raise ConfigError(f"--config-file {args.config_file}: no such file")
        props.update(read_properties_file(args.config_file))
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--config expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    if args.data_dir is not None:
        props["log.dirs"] = str(args.data_dir)
    if args.broker_id is not None:
        props["node.id"] = str(args.broker_id)
    if args.host is not None or args.port is not None or "listeners" not in props:
        host = args.host or DEFAULT_HOST
        port = DEFAULT_PORT if args.port is None else args.port
        props["listeners"] = f"PLAINTEXT://{host}:{port}"
    config = BrokerConfig.from_properties(props)
    if config.data_dir is None:
        raise ConfigError("a data directory is required: --data-dir DIR (or log.dirs=DIR)")
    return config


def parse_listener(listener: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` -> (host, port); an empty host means all interfaces."""
    first = listener.split(",")[0].strip()
    _, sep, address = first.rpartition("://")
    if not sep:
        address = first
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listeners: expected PLAINTEXT://host:port, got {listener!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
