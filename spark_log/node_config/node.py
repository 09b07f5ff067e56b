"""What a node is, parsed from its settings: its id and roles (`process.roles`), the controller
quorum (`controller.quorum.voters`), the listeners it binds with the address each advertises,
which of them are the controller's (`controller.listener.names`) and which one brokers
replicate through (`inter.broker.listener.name`).

Parsing refuses what cannot be read (a role Kafka does not know, a voter or listener entry that
does not parse, a listener without a security protocol); `node_checks` then refuses what reads
but cannot work together.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from spark_log.node_config.endpoints import (
    ADVERTISED_LISTENERS,
    LISTENERS,
    PROTOCOL_MAP,
    SERVED_PROTOCOL,
    Endpoint,
    check_distinct_ports,
    normalised,
    parse_endpoints,
    parse_protocol_map,
    split_list,
)
from spark_log.node_config.voters import VOTERS, parse_voters
from spark_log.properties import ConfigError

ROLES = "process.roles"
BROKER = "broker"
CONTROLLER = "controller"
CONTROLLER_LISTENER_NAMES = "controller.listener.names"
INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name"


@dataclass(frozen=True)
class Listener:
    """A listener the node binds. `host` "" is every interface and `port` 0 a free port; the
    advertised address is its `advertised.listeners` entry, else the bound one ("" and 0 then
    stand for the address and port the listener gets when it binds)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    controller: bool  # named in controller.listener.names


@dataclass(frozen=True)
class Node:
    node_id: int
    roles: frozenset[str]
    voters: Mapping[int, tuple[str, int]]  # in the order given; empty: this node alone
    listeners: tuple[Listener, ...]  # in the order of `listeners`
    advertised: tuple[Endpoint, ...]  # advertised.listeners as given
    controller_names: tuple[str, ...]
    inter_broker_name: str

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles

    @property
    def controller_listeners(self) -> tuple[Listener, ...]:
        """This node's controller listeners, in the order of controller.listener.names."""
        by_name = {listener.name: listener for listener in self.listeners}
        return tuple(by_name[n] for n in self.controller_names if n in by_name)

    @property
    def broker_listeners(self) -> tuple[Listener, ...]:
        return tuple(listener for listener in self.listeners if not listener.controller)

    @property
    def advertised_broker_names(self) -> tuple[str, ...]:
        """The broker listeners clients are told about (Kafka's effective advertised broker
        listeners): those of advertised.listeners when it is set, else every one."""
        names = [e.name for e in self.advertised] if self.advertised else \
            [listener.name for listener in self.listeners]
        return tuple(n for n in names if n not in self.controller_names)

    @property
    def inter_broker_listener(self) -> Listener | None:
        return next((lsn for lsn in self.listeners if lsn.name == self.inter_broker_name), None)


def parse_node(get: Callable[[str], Any], explicit: Collection[str]) -> Node:
    """The node described by the settings `get` answers; `explicit` names the settings that
    were given (listener.security.protocol.map, when not given, maps each controller listener
    to PLAINTEXT, as Kafka's does)."""
    controller_names = tuple(normalised(n) for n in split_list(get(CONTROLLER_LISTENER_NAMES)))
    protocols = parse_protocol_map(get(PROTOCOL_MAP))
    if PROTOCOL_MAP not in explicit:
        protocols = {**{n: SERVED_PROTOCOL for n in controller_names}, **protocols}
    bound = parse_endpoints(get(LISTENERS) or "", LISTENERS, protocols)
    check_distinct_ports(bound, get(LISTENERS) or "")
    advertised = parse_endpoints(get(ADVERTISED_LISTENERS) or "", ADVERTISED_LISTENERS,
                                 protocols)
    by_name = {e.name: e for e in advertised}
    listeners = tuple(
        Listener(e.name, e.protocol, e.host, e.port,
                 by_name[e.name].host if e.name in by_name else e.host,
                 by_name[e.name].port if e.name in by_name else e.port,
                 e.name in controller_names)
        for e in bound)
    return Node(get("node.id"), parse_roles(get(ROLES)), parse_voters(get(VOTERS)), listeners,
                tuple(advertised), controller_names,
                normalised(get(INTER_BROKER_LISTENER_NAME) or ""))


def parse_roles(text: str | None) -> frozenset[str]:
    """process.roles as Kafka reads it: broker, controller or both, each once."""
    roles = [role.strip() for role in split_list(text)]
    if not roles:
        raise ConfigError(f"{ROLES} is empty: give broker, controller or broker,controller "
                          "(ZooKeeper mode is not supported)")
    for role in roles:
        if role not in (BROKER, CONTROLLER):
            raise ConfigError(f"{ROLES}: unknown process role {role!r} (only 'broker' and "
                              "'controller' are allowed roles)")
    if len(set(roles)) != len(roles):
        raise ConfigError(f"{ROLES}: duplicate role names found in {text!r}")
    return frozenset(roles)
