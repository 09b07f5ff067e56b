"""Listener endpoints as Kafka parses them: `listeners` and `advertised.listeners` are
`NAME://host:port,...` (an empty host is every interface; `[...]` holds an IPv6 address) and
`listener.security.protocol.map` gives each listener name its security protocol.

Names are upper-cased, as Kafka normalises them. Each listener needs a protocol from the map;
listeners need distinct names and, but for port 0 (a free port) and an IPv4 and an IPv6 address
sharing one, distinct ports. Anything else is a `ConfigError` naming the setting and the entry.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_log.properties import ConfigError

LISTENERS = "listeners"
ADVERTISED_LISTENERS = "advertised.listeners"
PROTOCOL_MAP = "listener.security.protocol.map"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOL = "PLAINTEXT"
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class Endpoint:
    """One entry of a listener list: `host` is "" for every interface, `port` 0 for a free
    port picked when the listener binds."""

    name: str
    protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def normalised(name: str) -> str:
    """A listener name as Kafka compares them."""
    return name.strip().upper()


def split_list(text: str | None) -> list[str]:
    """The entries of a comma-separated setting, trimmed, empty ones dropped (Kafka's Csv)."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` -> {NAME: PROTOCOL}; ConfigError for an entry that is not one or a
    protocol Kafka does not know."""
    protocols: dict[str, str] = {}
    for entry in split_list(text):
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigError(f"{PROTOCOL_MAP}: expected NAME:PROTOCOL entries, got {entry!r}")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid security protocol `{protocol.strip()}` defined in "
                              f"{PROTOCOL_MAP} (one of {', '.join(SECURITY_PROTOCOLS)})")
        protocols[normalised(name)] = protocol
    return protocols


def parse_endpoints(text: str, setting: str, protocols: Mapping[str, str]) -> list[Endpoint]:
    """The endpoints of `setting` (listeners or advertised.listeners); ConfigError for an
    entry that does not parse, a name without a protocol or a name given twice."""
    endpoints = [_endpoint(entry, setting, protocols) for entry in split_list(text)]
    seen: set[str] = set()
    for endpoint in endpoints:
        if endpoint.name in seen:
            raise ConfigError(f"{setting}: listener {endpoint.name} is given twice (each "
                              f"listener must have a different name): {text}")
        seen.add(endpoint.name)
    return endpoints


def check_distinct_ports(endpoints: Iterable[Endpoint], text: str) -> None:
    """Kafka's rule for `listeners`: no two listeners on one port, unless the port is 0 or the
    two are an IPv4 and an IPv6 address."""
    by_port: dict[int, list[Endpoint]] = {}
    for endpoint in endpoints:
        if endpoint.port != 0:
            by_port.setdefault(endpoint.port, []).append(endpoint)
    for port, sharing in by_port.items():
        if len(sharing) > 1 and not _ipv4_and_ipv6(sharing):
            names = " and ".join(e.name for e in sharing)
            raise ConfigError(f"{LISTENERS}: listeners {names} both use port {port} (each "
                              f"listener must have a different port): {text}")


def _endpoint(entry: str, setting: str, protocols: Mapping[str, str]) -> Endpoint:
    match = _ENDPOINT.match(entry)
    if match is None or not match.group(1).strip():
        raise ConfigError(f"{setting}: cannot parse {entry!r} as a listener (NAME://host:port)")
    name, host, port = normalised(match.group(1)), match.group(2), int(match.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{setting}: port {port} of {entry!r} is not between 0 and 65535")
    protocol = protocols.get(name)
    if protocol is None:
        raise ConfigError(f"{setting}: listener {name} has no security protocol: name it in "
                          f"{PROTOCOL_MAP} (for example {name}:{SERVED_PROTOCOL})")
    return Endpoint(name, protocol, host, port)


def _ipv4_and_ipv6(endpoints: list[Endpoint]) -> bool:
    if len(endpoints) != 2:
        return False
    try:
        versions = {ipaddress.ip_address(e.host).version for e in endpoints}
    except ValueError:  # a host name or every interface: the port is taken either way
        return False
    return versions == {4, 6}
