"""The driver's cluster queries over the wire answer as librdkafka's do, on a real broker."""

from __future__ import annotations

import socket

import pytest

from spark_log.datasource.client import Cluster
from spark_log.datasource.errors import PylogConnectionError, PylogTopicError
from spark_log.datasource.options import Subscription
from spark_log.datasource.wire_cluster import WireCluster, open_cluster
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique


def test_wire_is_used_only_without_other_client_settings(shared_broker: BrokerProcess) -> None:
    address = shared_broker.bootstrap
    assert type(open_cluster(address, {}, 5000)) is WireCluster
    assert type(open_cluster(address, {"isolation.level": "read_uncommitted"}, 5000)) \
        is WireCluster
    assert type(open_cluster(address, {"socket.timeout.ms": "9000"}, 5000)) is Cluster


def test_partitions_and_offsets_equal_librdkafkas(shared_broker: BrokerProcess) -> None:
    first = create_topic(shared_broker, unique("wire"), partitions=3)
    second = create_topic(shared_broker, unique("wire"))
    produce(shared_broker, first, [b"a", b"b", b"c", b"d"], partition=1,
            timestamps=[1000, 2000, 3000, 4000])
    wire = WireCluster(shared_broker.bootstrap, {}, 10_000)
    kafka = Cluster(shared_broker.bootstrap, {}, 10_000)
    try:
        for sub in (Subscription("subscribe", topics=(first, second)),
                    Subscription("subscribePattern", pattern=first[:-8] + ".*"),
                    Subscription("assign", assignments=((first, 2), (second, 0)))):
            assert wire.partitions_for(sub) == kafka.partitions_for(sub)
        tps = wire.partitions_for(Subscription("subscribe", topics=(first, second)))
        assert wire.earliest(tps) == kafka.earliest(tps)
        assert wire.latest(tps) == kafka.latest(tps) == {**{tp: 0 for tp in tps},
                                                         (first, 1): 4}
        stamps = {(first, 1): 2500, (first, 0): 10, (second, 0): 1}
        assert wire.for_times(stamps) == kafka.for_times(stamps) == {
            (first, 1): 2, (first, 0): -1, (second, 0): -1}
        with pytest.raises(PylogTopicError, match="do not exist"):
            wire.partitions_for(Subscription("subscribe", topics=(unique("missing"),)))
    finally:
        wire.close()
        kafka.close()


def test_group_offsets_round_trip_through_either_client(shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("wire-group"), partitions=2)
    group = unique("group")
    wire = WireCluster(shared_broker.bootstrap, {}, 10_000)
    kafka = Cluster(shared_broker.bootstrap, {}, 10_000)
    try:
        wire.commit(group, {(topic, 0): 5, (topic, 1): 7})
        assert kafka.committed(group, [(topic, 0), (topic, 1)]) == {(topic, 0): 5, (topic, 1): 7}
        kafka.commit(group, {(topic, 0): 9})
        assert wire.committed(group, [(topic, 0), (topic, 1)]) == {(topic, 0): 9, (topic, 1): 7}
    finally:
        wire.close()
        kafka.close()


def test_an_unreachable_cluster_is_named() -> None:
    with socket.socket() as s:  # bound, never listening (so no one else can): refused
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        cluster = open_cluster(address, {}, 5000)
        with pytest.raises(PylogConnectionError,
                           match=f"Cannot reach the Kafka cluster at {address}"):
            cluster.partitions_for(Subscription("subscribe", topics=("t",)))
