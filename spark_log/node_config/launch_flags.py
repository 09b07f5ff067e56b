"""The command-line flags that give a node's settings, shared by `spark-log broker` (and `python
-m spark_log.broker`) and `spark-log storage`.

Flags are shorthands for Kafka settings: `--data-dir` is `log.dirs`, `--broker-id` is `node.id`,
`--host/--port` form the PLAINTEXT listener of `listeners` (other listeners, such as a
CONTROLLER one, are kept); anything else goes through `--config key=value` (repeatable) or
`--config-file server.properties`, under Kafka's names. Flags win over `--config`, which wins
over the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spark_log.node_config.broker_config import BrokerConfig
from spark_log.node_config.endpoints import normalised, split_list
from spark_log.properties import ConfigError, read_properties_file

DEFAULT_PORT = 9092
DEFAULT_HOST = "127.0.0.1"
PLAINTEXT = "PLAINTEXT"


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-dir, --host, --port, --broker-id, --config and --config-file."""
    parser.add_argument("--data-dir", type=Path, help="directory of the log (log.dirs)")
    parser.add_argument("--host", default=None,
                        help=f"address of the PLAINTEXT listener (default {DEFAULT_HOST}; "
                             "0.0.0.0 for all)")
    parser.add_argument("--port", type=int, default=None,
                        help=f"port of the PLAINTEXT listener (default {DEFAULT_PORT}; 0 picks a "
                             "free port)")
    parser.add_argument("--broker-id", type=int, default=None, help="node.id of this node")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting under its Kafka name, e.g. num.partitions=3")
    parser.add_argument("--config-file", type=Path, default=None,
                        help="a Kafka server.properties file")


def config_from_arguments(args: argparse.Namespace) -> BrokerConfig:
    """Merge --config-file, --config and the shorthand flags into one validated config that
    names a data directory."""
    config = BrokerConfig.from_properties(properties_from_arguments(args))
    if config.data_dir is None:
        raise ConfigError("a data directory is required: --data-dir DIR (or log.dirs=DIR)")
    return config


def properties_from_arguments(args: argparse.Namespace) -> dict[str, str]:
    """The settings the flags give, before validation."""
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
        props["listeners"] = with_plaintext_listener(props.get("listeners", ""), host, port)
    return props


def with_plaintext_listener(listeners: str, host: str, port: int) -> str:
    """`listeners` with its PLAINTEXT entry at host:port (put first when it has none)."""
    entry = f"{PLAINTEXT}://{f'[{host}]' if ':' in host else host}:{port}"
    entries = split_list(listeners)
    named = [normalised(e.partition("://")[0]) for e in entries]
    if PLAINTEXT in named:
        entries[named.index(PLAINTEXT)] = entry
    else:
        entries.insert(0, entry)
    return ",".join(entries)
