"""Command-line flags of a broker (`spark-log broker` and `python -m spark_log.broker`): the
flags that give its settings (`spark_log.node_config.launch_flags`: `--data-dir`, `--host/--port`,
`--broker-id`, `--config`, `--config-file`) and the broker's own, `--metrics-port` and
`--log-level`.
"""

from __future__ import annotations

import argparse

from spark_log.node_config.launch_flags import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    add_config_arguments,
    config_from_arguments,
)
from spark_log.properties import ConfigError

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "add_broker_arguments", "config_from_arguments",
           "parse_listener"]


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on this port (default: off)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")


def parse_listener(listener: str) -> tuple[str, int]:
    """(host, port) of the PLAINTEXT entry of a listener list, else of its first entry; an
    empty host means all interfaces. (`BrokerConfig.listeners` gives every listener parsed.)"""
    entries = [e.strip() for e in listener.split(",") if e.strip()] or [listener]
    chosen = next((e for e in entries if e.upper().startswith("PLAINTEXT://")), entries[0])
    _, sep, address = chosen.rpartition("://")
    if not sep:
        address = chosen
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listeners: expected PLAINTEXT://host:port, got {listener!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
