"""A node's settings (`spark_log.node_config`): the defaults of a plain broker, parsing of
`controller.quorum.voters`, `listeners`, `advertised.listeners` and the security protocol map,
the typed accessors the broker and the controller read, the command-line shorthands, and every
refusal of roles, voters and listeners that cannot work together, as one line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from spark_log.node_config.broker_config import BrokerConfig
from spark_log.node_config.launch_flags import (
    add_config_arguments,
    config_from_arguments,
    with_plaintext_listener,
)
from spark_log.node_config.node import Listener
from spark_log.properties import ConfigError

QUORUM = {"controller.quorum.voters": "1@ctl-1:9093,2@ctl-2:9093,3@ctl-3:9093"}


def config(**settings: str) -> BrokerConfig:
    """A config from `settings` given with dots as underscores (node_id=1 is node.id=1)."""
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in settings.items()})


def refusal(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties(props)
    message = str(caught.value)
    assert "\n" not in message
    return message


def flags(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_arguments(parser.parse_args(argv))


# ---- defaults ---------------------------------------------------------------------------------


def test_a_plain_broker_is_the_single_node_of_today(tmp_path: Path) -> None:
    c = flags("--data-dir", str(tmp_path), "--port", "0")
    assert c.roles == frozenset({"broker", "controller"})
    assert c.is_broker and c.is_controller
    assert c.node_id == 0 and dict(c.voters) == {}
    assert c.formats_new_dirs
    assert c.listeners == (Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0, "127.0.0.1", 0,
                                    False),)
    assert c.broker_listeners == c.listeners and c.controller_listeners == ()
    assert c.inter_broker_listener == c.listeners[0]
    assert c.controller_listener_names == ("CONTROLLER",)
    assert c.get("listeners") == "PLAINTEXT://127.0.0.1:0"
    assert c.data_dir == tmp_path and c.metadata_log_dir == tmp_path
    assert c.storage_dirs == (tmp_path,)
    quorum = c.quorum_config()
    assert quorum.voters == frozenset({0})
    assert (quorum.election_timeout_ms, quorum.fetch_timeout_ms, quorum.request_timeout_ms,
            quorum.election_backoff_max_ms, quorum.retry_backoff_ms) == (1000, 2000, 2000,
                                                                        1000, 20)


def test_kafka_defaults_of_the_new_settings() -> None:
    c = config()
    expected = {
        "broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000,
        "default.replication.factor": 1, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
        "auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 300,
        "leader.imbalance.per.broker.percentage": 10, "unclean.leader.election.enable": False,
        "broker.rack": None, "metadata.log.dir": None,
        "metadata.log.max.record.bytes.between.snapshots": 20971520,
        "metadata.max.idle.interval.ms": 500, "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "process.roles": "broker,controller",
        "controller.quorum.voters": "",
    }
    assert {name: c.get(name) for name in expected} == expected
    assert c.rack is None and config(broker_rack="r1").rack == "r1"


def test_a_kafka_server_properties_still_loads() -> None:
    """Kafka's own KRaft example settings: what is not used here is ignored, not refused."""
    c = BrokerConfig.from_properties({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "inter.broker.listener.name": "PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "num.network.threads": "3", "log.dirs": "/tmp/kraft-combined-logs",
        "controller.quorum.append.linger.ms": "25", "metadata.log.segment.bytes": "1048576",
        "transaction.state.log.min.isr": "1", "share.coordinator.state.topic.min.isr": "1",
    })
    assert c.node_id == 1 and dict(c.voters) == {1: ("localhost", 9093)}
    assert not c.formats_new_dirs
    (controller,) = c.controller_listeners
    assert (controller.host, controller.port, controller.advertised_host) == ("", 9093,
                                                                              "localhost")
    assert [lsn.name for lsn in c.broker_listeners] == ["PLAINTEXT"]


def test_a_misspelt_quorum_setting_is_refused_not_ignored() -> None:
    assert "unknown broker config 'controller.quorum.voter'" in refusal(
        {"controller.quorum.voter": "1@h:1"})


def test_storage_dirs_are_the_log_dirs_and_the_metadata_dir(tmp_path: Path) -> None:
    a, b, m = tmp_path / "b", tmp_path / "a", tmp_path / "meta"
    c = config(log_dirs=f"{a}, {b}", metadata_log_dir=str(m))
    assert c.log_dirs == (a, b) and c.data_dir == a and c.metadata_log_dir == m
    assert c.storage_dirs == (b, a, m)


# ---- voters -------------------------------------------------------------------------------


def test_voters_parse_in_order_with_ipv6_and_names() -> None:
    c = config(node_id="2", controller_quorum_voters=" 3@[::1]:9095, 2@ctl-2.example:9093",
               listeners="PLAINTEXT://:9092,CONTROLLER://:9093")
    assert list(c.voters.items()) == [(3, ("::1", 9095)), (2, ("ctl-2.example", 9093))]
    assert c.quorum_config().voters == frozenset({2, 3})
    assert c.quorum_config().majority == 2


@pytest.mark.parametrize(("voters", "fragment"), [
    ("1@localhost", "cannot parse the host and port of '1@localhost'"),
    ("localhost:9093", "cannot parse 'localhost:9093': each entry is {id}@{host}:{port}"),
    ("one@localhost:9093", "the voter id of 'one@localhost:9093' is not a non-negative integer"),
    ("-1@localhost:9093", "is not a non-negative integer"),
    ("1@localhost:port", "cannot parse the host and port"),
    ("1@a@b:1", "cannot parse '1@a@b:1'"),
    ("1@localhost:70000", "port 70000 of '1@localhost:70000' is not between 0 and 65535"),
    ("1@0.0.0.0:9093", "host 0.0.0.0 is not routable"),
    ("1@a:9093,2@b:9093,1@c:9093", "voter id 1 is given twice"),
])
def test_a_voter_entry_that_does_not_parse_is_refused(voters: str, fragment: str) -> None:
    message = refusal({"controller.quorum.voters": voters})
    assert message.startswith("controller.quorum.voters: ") and fragment in message


# ---- listeners and advertised listeners ---------------------------------------------------


def test_listeners_advertised_per_name() -> None:
    c = config(**{"listeners": "plaintext://0.0.0.0:9092,INTERNAL://[::1]:0",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                  "advertised.listeners": "PLAINTEXT://broker-1.example:19092"})
    plain, internal = c.listeners
    assert plain == Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092, "broker-1.example",
                             19092, False)
    assert internal == Listener("INTERNAL", "PLAINTEXT", "::1", 0, "::1", 0, False)


def test_two_listeners_may_share_a_port_on_ipv4_and_ipv6() -> None:
    c = config(**{"listeners": "PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT"})
    assert [lsn.port for lsn in c.listeners] == [9092, 9092]


def test_the_controller_listener_gets_plaintext_without_an_explicit_map() -> None:
    c = config(node_id="1", listeners="PLAINTEXT://:9092,CONTROLLER://:9093", **QUORUM)
    assert [(lsn.name, lsn.protocol, lsn.controller) for lsn in c.listeners] == [
        ("PLAINTEXT", "PLAINTEXT", False), ("CONTROLLER", "PLAINTEXT", True)]


MAP = "listener.security.protocol.map"
LISTENER_REFUSALS = {
    "no security protocol": ({"listeners": "PLAINTEXT://:9092,INTERNAL://:9093"},
                             "listeners: listener INTERNAL has no security protocol: name it in "
                             "listener.security.protocol.map (for example INTERNAL:PLAINTEXT)"),
    "not plaintext": ({"listeners": "PLAINTEXT://:9092,SSL://:9093"},
                      "listener SSL uses security protocol SSL (listener.security.protocol.map),"
                      " but only PLAINTEXT is served"),
    "plaintext named as ssl": ({"listeners": "PLAINTEXT://:9092", MAP: "PLAINTEXT:SASL_SSL"},
                               "uses security protocol SASL_SSL"),
    "unknown protocol": ({MAP: "PLAINTEXT:TLS"},
                         "Invalid security protocol `TLS` defined in "
                         "listener.security.protocol.map"),
    "map entry": ({MAP: "PLAINTEXT"}, "expected NAME:PROTOCOL entries, got 'PLAINTEXT'"),
    "unparsable": ({"listeners": "PLAINTEXT:9092"},
                   "listeners: cannot parse 'PLAINTEXT:9092' as a listener (NAME://host:port)"),
    "bad port": ({"listeners": "PLAINTEXT://:99999"}, "port 99999 of 'PLAINTEXT://:99999'"),
    "duplicate name": ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"},
                       "listener PLAINTEXT is given twice"),
    "duplicate port": ({"listeners": "PLAINTEXT://:9092,INTERNAL://:9092",
                        MAP: "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
                       "listeners PLAINTEXT and INTERNAL both use port 9092"),
    "advertised unknown": ({"advertised.listeners": "INTERNAL://h:1",
                            MAP: "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
                           "advertised.listeners: listener INTERNAL is not one of the listeners "
                           "(PLAINTEXT)"),
    "advertised duplicate": ({"advertised.listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"},
                             "advertised.listeners: listener PLAINTEXT is given twice"),
    "advertised meta-address": ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
                                "cannot use the nonroutable meta-address 0.0.0.0"),
    "inter-broker unknown": ({"inter.broker.listener.name": "INTERNAL"},
                             "inter.broker.listener.name must be a listener name defined in "
                             "advertised.listeners. The valid options based on currently "
                             "configured listeners are PLAINTEXT"),
    "inter-broker not advertised": (
        {"listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
         MAP: "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
         "advertised.listeners": "PLAINTEXT://h:9092", "inter.broker.listener.name": "INTERNAL"},
        "The valid options based on currently configured listeners are PLAINTEXT"),
}


@pytest.mark.parametrize("case", list(LISTENER_REFUSALS))
def test_listeners_that_cannot_be_served_are_refused(case: str) -> None:
    props, fragment = LISTENER_REFUSALS[case]
    assert fragment in refusal(props)


# ---- roles --------------------------------------------------------------------------------


def test_roles_parse() -> None:
    assert config(process_roles=" controller , broker").roles == frozenset({"broker",
                                                                           "controller"})
    broker = config(process_roles="broker", node_id="7", **QUORUM)
    assert broker.roles == frozenset({"broker"}) and not broker.is_controller
    assert broker.controller_listeners == () and broker.controller_listener_names == (
        "CONTROLLER",)
    controller = config(process_roles="controller", node_id="2", listeners="CONTROLLER://:9093",
                        **QUORUM)
    assert not controller.is_broker and controller.broker_listeners == ()
    assert controller.inter_broker_listener is None


ROLE_REFUSALS = {
    "unknown role": ({"process.roles": "broker,bruker"},
                     "process.roles: unknown process role 'bruker' (only 'broker' and "
                     "'controller' are allowed roles)"),
    "duplicate role": ({"process.roles": "broker,broker"}, "duplicate role names"),
    "no role": ({"process.roles": ""}, "process.roles is empty"),
    "controller not a voter": (
        {"node.id": "4", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", **QUORUM},
        "If process.roles contains the 'controller' role, the node id 4 must be included in "
        "the set of voters controller.quorum.voters={1, 2, 3}"),
    "broker-only voter": (
        {"process.roles": "broker", "node.id": "2", **QUORUM},
        "If process.roles contains just the 'broker' role, the node id 2 must not be included "
        "in the set of voters controller.quorum.voters={1, 2, 3}"),
    "broker-only without voters": ({"process.roles": "broker"},
                                   "process.roles=broker needs controller.quorum.voters"),
    "controller-only without voters": ({"process.roles": "controller",
                                        "listeners": "CONTROLLER://:9093"},
                                       "process.roles=controller needs controller.quorum.voters"),
    "no controller listener": (
        {"node.id": "1", **QUORUM},
        "CONTROLLER is not a listener of this node (add CONTROLLER://ctl-1:9093, the address "
        "of its voter entry, to listeners)"),
    "controller listener on another port": (
        {"node.id": "1", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9094", **QUORUM},
        "controller.quorum.voters gives node 1 the address ctl-1:9093, but its controller "
        "listener CONTROLLER is on port 9094"),
    "advertised controller on another port": (
        {"node.id": "1", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
         "advertised.listeners": "CONTROLLER://ctl-1:9095", **QUORUM},
        "listener CONTROLLER is on port 9095"),
    "no controller listener name": (
        {"node.id": "1", "controller.listener.names": "", **QUORUM},
        "controller.listener.names must contain at least one value appearing in the "
        "'listeners' configuration when running the KRaft controller role"),
    "controller listener for brokers": (
        {"node.id": "1", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
         "inter.broker.listener.name": "CONTROLLER", **QUORUM},
        "inter.broker.listener.name=CONTROLLER is a controller listener "
        "(controller.listener.names): brokers replicate through a broker listener, one of "
        "PLAINTEXT"),
    "only controller listeners on a broker": (
        {"node.id": "1", "listeners": "CONTROLLER://:9093", **QUORUM},
        "There must be at least one broker listener"),
    "controller-only with a broker listener": (
        {"process.roles": "controller", "node.id": "1",
         "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", **QUORUM},
        "process.roles=controller: listener PLAINTEXT is not a controller listener "
        "(controller.listener.names=CONTROLLER); a controller-only node serves its controller "
        "listeners only"),
    "broker-only serving the controller listener": (
        {"process.roles": "broker", "node.id": "7",
         "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", **QUORUM},
        "controller.listener.names must not contain a value appearing in the 'listeners' "
        "configuration when running KRaft with just the broker role"),
    "broker-only without controller listener names": (
        {"process.roles": "broker", "node.id": "7", "controller.listener.names": "", **QUORUM},
        "controller.listener.names must contain at least one value when running KRaft with "
        "just the broker role"),
    "node.id and broker.id differ": ({"node.id": "1", "broker.id": "2"},
                                     "You must set `node.id` to the same value as `broker.id`"),
    "negative node.id": ({"node.id": "-1"},
                         "invalid value -1 for broker config node.id: must not be negative"),
    "zero election timeout": ({"controller.quorum.election.timeout.ms": "0"},
                              "controller.quorum.election.timeout.ms: must be at least 1"),
    "replication factor 0": ({"offsets.topic.replication.factor": "0"},
                             "offsets.topic.replication.factor: must be at least 1"),
    "boolean": ({"unclean.leader.election.enable": "yes"},
                "invalid value 'yes' for broker config unclean.leader.election.enable"),
}


@pytest.mark.parametrize("case", list(ROLE_REFUSALS))
def test_roles_and_voters_that_cannot_work_are_refused(case: str) -> None:
    props, fragment = ROLE_REFUSALS[case]
    assert fragment in refusal(props)


def test_the_node_ids_may_be_given_under_both_names_when_equal() -> None:
    assert BrokerConfig.from_properties({"node.id": "3", "broker.id": "3"}).node_id == 3
    assert BrokerConfig.from_properties({"broker.id": "4"}).node_id == 4


# ---- command-line shorthands --------------------------------------------------------------


def test_host_and_port_form_the_plaintext_listener_and_keep_the_others(tmp_path: Path) -> None:
    c = flags("--data-dir", str(tmp_path), "--port", "0", "--broker-id", "1",
              "--config", "controller.quorum.voters=1@127.0.0.1:9093",
              "--config", "listeners=CONTROLLER://127.0.0.1:9093,PLAINTEXT://10.0.0.1:9092")
    assert c.get("listeners") == "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:0"
    assert [(lsn.name, lsn.port) for lsn in c.listeners] == [("CONTROLLER", 9093),
                                                             ("PLAINTEXT", 0)]


def test_the_listeners_of_a_file_hold_without_host_or_port(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("listeners=PLAINTEXT://0.0.0.0:19092\nlog.dirs=/data\n")
    c = flags("--config-file", str(server))
    assert c.get("listeners") == "PLAINTEXT://0.0.0.0:19092" and c.data_dir == Path("/data")


@pytest.mark.parametrize(("listeners", "host", "port", "expected"), [
    ("", "127.0.0.1", 9092, "PLAINTEXT://127.0.0.1:9092"),
    ("INTERNAL://:9093", "0.0.0.0", 0, "PLAINTEXT://0.0.0.0:0,INTERNAL://:9093"),
    ("plaintext://h:1, CONTROLLER://:9093", "::1", 5, "PLAINTEXT://[::1]:5,CONTROLLER://:9093"),
])
def test_with_plaintext_listener(listeners: str, host: str, port: int, expected: str) -> None:
    assert with_plaintext_listener(listeners, host, port) == expected


def test_a_data_directory_is_required() -> None:
    with pytest.raises(ConfigError, match="a data directory is required"):
        flags("--port", "0")
