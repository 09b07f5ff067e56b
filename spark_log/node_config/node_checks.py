"""The checks Kafka's KafkaConfig makes of a node's roles, voters and listeners at start, each
refusal a `ConfigError` of one line saying what is wrong (Kafka's wording where it has one).

A node with an empty `controller.quorum.voters` and both roles is a quorum of its own, the
single node that needs no controller listener (the sidecar). Otherwise: a controller is among
the voters and serves a controller listener on the port its voter entry gives; a broker-only
node is not a voter and binds no controller listener; a controller-only node binds nothing
else; a broker replicates through a broker listener that it advertises. Advertised listeners
name bound listeners and a routable host. Only PLAINTEXT listeners are served.
"""

from __future__ import annotations

from spark_log.node_config.endpoints import (
    ADVERTISED_LISTENERS,
    LISTENERS,
    PROTOCOL_MAP,
    SERVED_PROTOCOL,
)
from spark_log.node_config.node import (
    CONTROLLER_LISTENER_NAMES,
    INTER_BROKER_LISTENER_NAME,
    ROLES,
    Node,
)
from spark_log.node_config.voters import NON_ROUTABLE_HOST, VOTERS
from spark_log.properties import ConfigError


def check_node(node: Node) -> None:
    """ConfigError (one line) for the first thing Kafka would refuse in `node`."""
    _check_protocols(node)
    _check_advertised(node)
    if node.is_controller and not node.is_broker:
        _check_controller_only(node)
    elif not node.is_controller:
        _check_broker_only(node)
    if node.is_controller and node.voters:
        _check_voter(node)
    if node.is_broker:
        _check_broker_listeners(node)


def _check_protocols(node: Node) -> None:
    for listener in node.listeners:
        if listener.protocol != SERVED_PROTOCOL:
            raise ConfigError(
                f"{LISTENERS}: listener {listener.name} uses security protocol "
                f"{listener.protocol} ({PROTOCOL_MAP}), but only {SERVED_PROTOCOL} is served")


def _check_advertised(node: Node) -> None:
    bound = {listener.name for listener in node.listeners}
    for endpoint in node.advertised:
        if endpoint.name not in bound:
            raise ConfigError(
                f"{ADVERTISED_LISTENERS}: listener {endpoint.name} is not one of the "
                f"{LISTENERS} ({', '.join(sorted(bound)) or 'none'}); advertised listener "
                f"names must be equal to or a subset of the ones defined in {LISTENERS}")
        if endpoint.host == NON_ROUTABLE_HOST:
            raise ConfigError(f"{ADVERTISED_LISTENERS} cannot use the nonroutable meta-address "
                              f"{NON_ROUTABLE_HOST} ({endpoint}): use a routable IP address")


def _check_broker_only(node: Node) -> None:
    if not node.voters:
        raise ConfigError(f"{ROLES}=broker needs {VOTERS}: a broker-only node must be told "
                          "where the controllers are (id@host:port,...)")
    if node.node_id in node.voters:
        raise ConfigError(
            f"If {ROLES} contains just the 'broker' role, the node id {node.node_id} must not "
            f"be included in the set of voters {VOTERS}={_ids(node)}")
    if not node.controller_names:
        raise ConfigError(f"{CONTROLLER_LISTENER_NAMES} must contain at least one value when "
                          "running KRaft with just the broker role")
    if node.controller_listeners:
        names = ", ".join(listener.name for listener in node.controller_listeners)
        raise ConfigError(
            f"{CONTROLLER_LISTENER_NAMES} must not contain a value appearing in the "
            f"'{LISTENERS}' configuration when running KRaft with just the broker role "
            f"({names}): a broker-only node reaches the controllers, it does not serve them")


def _check_controller_only(node: Node) -> None:
    if not node.voters:
        raise ConfigError(f"{ROLES}=controller needs {VOTERS}: only a node with both roles "
                          "runs as a quorum of its own")
    for listener in node.listeners:
        if not listener.controller:
            raise ConfigError(
                f"{ROLES}=controller: listener {listener.name} is not a controller listener "
                f"({CONTROLLER_LISTENER_NAMES}={','.join(node.controller_names)}); a "
                "controller-only node serves its controller listeners only")


def _check_voter(node: Node) -> None:
    """A controller of a quorum: a voter, serving its controller listener(s) on the port its
    voter entry gives."""
    if node.node_id not in node.voters:
        raise ConfigError(
            f"If {ROLES} contains the 'controller' role, the node id {node.node_id} must be "
            f"included in the set of voters {VOTERS}={_ids(node)}")
    host, port = node.voters[node.node_id]
    bound = {listener.name for listener in node.listeners}
    for name in node.controller_names:
        if name not in bound:
            raise ConfigError(
                f"{CONTROLLER_LISTENER_NAMES} must only contain values appearing in the "
                f"'{LISTENERS}' configuration when running the KRaft controller role: "
                f"{name} is not a listener of this node (add {name}://{host}:{port}, the "
                f"address of its voter entry, to {LISTENERS})")
    if not node.controller_listeners:
        raise ConfigError(
            f"{CONTROLLER_LISTENER_NAMES} must contain at least one value appearing in the "
            f"'{LISTENERS}' configuration when running the KRaft controller role")
    listener = node.controller_listeners[0]
    if listener.advertised_port != port:
        raise ConfigError(
            f"{VOTERS} gives node {node.node_id} the address {host}:{port}, but its controller "
            f"listener {listener.name} is on port {listener.advertised_port}: the other "
            "voters would not reach it")


def _check_broker_listeners(node: Node) -> None:
    name = node.inter_broker_name
    if not node.broker_listeners:
        raise ConfigError("There must be at least one broker listener: every listener of "
                          f"{LISTENERS} appears in {CONTROLLER_LISTENER_NAMES}")
    if name in node.controller_names:
        raise ConfigError(
            f"{INTER_BROKER_LISTENER_NAME}={name} is a controller listener "
            f"({CONTROLLER_LISTENER_NAMES}): brokers replicate through a broker listener, one "
            f"of {', '.join(node.advertised_broker_names)}")
    if name not in node.advertised_broker_names:
        raise ConfigError(
            f"{INTER_BROKER_LISTENER_NAME} must be a listener name defined in "
            f"{ADVERTISED_LISTENERS}. The valid options based on currently configured "
            f"listeners are {','.join(node.advertised_broker_names)}")


def _ids(node: Node) -> str:
    return "{" + ", ".join(str(voter) for voter in sorted(node.voters)) + "}"
