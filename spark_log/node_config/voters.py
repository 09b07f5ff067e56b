"""`controller.quorum.voters`: the controller quorum as `id@host:port,...` (Kafka's
QuorumConfig.parseVoterConnections), in the order given.

Each entry needs a non-negative integer id, a host and a port; the meta-address 0.0.0.0 is not
an address another node can reach; an id may appear once. Anything else is a `ConfigError`
naming the entry.
"""

from __future__ import annotations

import re

from spark_log.node_config.endpoints import split_list
from spark_log.properties import ConfigError

VOTERS = "controller.quorum.voters"
NON_ROUTABLE_HOST = "0.0.0.0"
_FORM = "each entry is {id}@{host}:{port}"
_ADDRESS = re.compile(r"^\[?([0-9a-zA-Z\-._%:]+)\]?:([0-9]+)$")


def parse_voters(text: str | None) -> dict[int, tuple[str, int]]:
    """{voter id: (host, port)}, empty when the setting is."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in split_list(text):
        voter_id, address = _voter(entry)
        if voter_id in voters:
            raise ConfigError(f"{VOTERS}: voter id {voter_id} is given twice ({text}); each "
                              "controller is listed once")
        voters[voter_id] = address
    return voters


def _voter(entry: str) -> tuple[int, tuple[str, int]]:
    id_text, sep, address = entry.partition("@")
    if not sep or "@" in address:
        raise ConfigError(f"{VOTERS}: cannot parse {entry!r}: {_FORM}")
    if not id_text.strip().isdigit():
        raise ConfigError(f"{VOTERS}: the voter id of {entry!r} is not a non-negative integer: "
                          f"{_FORM}")
    match = _ADDRESS.match(address.strip())
    if match is None:
        raise ConfigError(f"{VOTERS}: cannot parse the host and port of {entry!r}: {_FORM}")
    host, port = match.group(1), int(match.group(2))
    if port > 65535:
        raise ConfigError(f"{VOTERS}: port {port} of {entry!r} is not between 0 and 65535")
    if host == NON_ROUTABLE_HOST:
        raise ConfigError(f"{VOTERS}: {entry!r}: host {NON_ROUTABLE_HOST} is not routable; "
                          "give the address the other nodes reach this controller at")
    return int(id_text), (host, port)
