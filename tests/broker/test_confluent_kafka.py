"""confluent-kafka (librdkafka) against the real broker process: produce, consume, admin calls."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from tests.broker_process import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    client = admin(broker)  # the client must outlive its futures
    client.create_topics([NewTopic(name, partitions, config=configs)])[name].result(timeout=30)


def consume_all(broker: BrokerProcess, partitions: list[TopicPartition], count: int,
                timeout_s: float = 30, **settings: object) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False, **settings})
    consumer.assign(partitions)
    messages = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(messages) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            messages.append(msg)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(shared_broker: BrokerProcess, codec: str) -> None:
    topic = unique(f"codec-{codec}")
    create_topic(shared_broker, topic)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap,
                         "compression.type": codec, "linger.ms": 5})
    sent = []
    for i in range(500):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 11 == 0 else (f"value-{i}-" * (i % 5 + 1)).encode()
        headers = [("n", str(i).encode()), ("empty", b"")] if i % 2 else None
        ts = 1_700_000_000_000 + i
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts)
        sent.append((key, value, headers or None, ts))
    assert producer.flush(30) == 0

    got = consume_all(shared_broker, [TopicPartition(topic, 0, OFFSET_BEGINNING)], len(sent))
    assert [m.offset() for m in got] == list(range(len(sent)))
    received = [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got]
    expected = [(k, v, [(hk, hv) for hk, hv in h] if h else None, ts) for k, v, h, ts in sent]
    assert received == expected
    assert all(m.timestamp()[0] == 1 for m in got)  # TIMESTAMP_CREATE_TIME


def test_consume_from_middle_of_a_batch_returns_the_requested_offset_first(
        shared_broker: BrokerProcess) -> None:
    topic = unique("mid")
    create_topic(shared_broker, topic)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 50})
    for i in range(100):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(30) == 0
    got = consume_all(shared_broker, [TopicPartition(topic, 0, 42)], 58)
    assert [int(m.value()) for m in got] == list(range(42, 100))


def test_watermarks_and_offsets_for_times(shared_broker: BrokerProcess) -> None:
    topic = unique("times")
    create_topic(shared_broker, topic, partitions=2)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    base = 1_700_000_000_000
    for i in range(20):
        producer.produce(topic, partition=i % 2, value=b"x", timestamp=base + i * 1000)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 10)
        # partition 0 holds timestamps base, base+2s, ...: base+5s is first reached by offset 3
        found = consumer.offsets_for_times(
            [TopicPartition(topic, 0, base + 5000), TopicPartition(topic, 1, base + 19_000)],
            timeout=10)
        assert [tp.offset for tp in found] == [3, 9]
        beyond = consumer.offsets_for_times([TopicPartition(topic, 1, base + 60_000)], timeout=10)
        assert [tp.offset for tp in beyond] == [-1]
    finally:
        consumer.close()


def test_create_and_delete_topics(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    name = unique("lifecycle")
    client.create_topics([NewTopic(name, 4)])[name].result(30)
    topics = client.list_topics(timeout=10).topics
    assert len(topics[name].partitions) == 4

    with pytest.raises(KafkaException) as exists:
        client.create_topics([NewTopic(name, 1)])[name].result(30)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    with pytest.raises(KafkaException) as invalid:
        client.create_topics([NewTopic("bad/name", 1)])["bad/name"].result(30)
    assert invalid.value.args[0].code() == KafkaError.TOPIC_EXCEPTION

    replicated = unique("rf")
    with pytest.raises(KafkaException) as factor:
        client.create_topics([NewTopic(replicated, 1, 3)])[replicated].result(30)
    assert factor.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR

    client.delete_topics([name])[name].result(30)
    assert name not in client.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as unknown:
        client.delete_topics([name])[name].result(30)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    name = unique("grow")
    create_topic(shared_broker, name, partitions=2)
    client.create_partitions([NewPartitions(name, 5)])[name].result(30)
    assert len(client.list_topics(name, timeout=10).topics[name].partitions) == 5
    with pytest.raises(KafkaException) as shrink:
        client.create_partitions([NewPartitions(name, 3)])[name].result(30)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    producer.produce(name, partition=4, value=b"new partition")
    assert producer.flush(30) == 0
    got = consume_all(shared_broker, [TopicPartition(name, 4, OFFSET_BEGINNING)], 1)
    assert got[0].value() == b"new partition"


def test_delete_records_moves_the_log_start_offset(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    name = unique("trim")
    create_topic(shared_broker, name)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for i in range(30):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(30) == 0
    result = client.delete_records([TopicPartition(name, 0, 12)])
    low = result[TopicPartition(name, 0, 12)].result(30)
    assert low.low_watermark == 12
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (12, 30)
    finally:
        consumer.close()
    got = consume_all(shared_broker, [TopicPartition(name, 0, OFFSET_BEGINNING)], 18)
    assert [int(m.value()) for m in got] == list(range(12, 30))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_describe_and_alter_topic_configs(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    name = unique("cfg")
    create_topic(shared_broker, name, **{"retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)

    def describe() -> dict:
        return client.describe_configs([resource])[resource].result(30)

    configs = describe()
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    incremental = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    client.incremental_alter_configs([incremental])[incremental].result(30)
    configs = describe()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)

    bad = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as invalid:
        client.incremental_alter_configs([bad])[bad].result(30)
    assert invalid.value.args[0].code() == KafkaError.INVALID_CONFIG

    legacy = ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"segment.ms": "60000"})
    client.alter_configs([legacy])[legacy].result(30)
    configs = describe()
    assert configs["segment.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete"  # AlterConfigs replaces the whole set


def test_configs_persist_with_the_topic_across_restart(broker: BrokerProcess) -> None:
    name = unique("persist")
    create_topic(broker, name, 3, **{"retention.bytes": "1048576"})
    broker.restart()
    client = admin(broker)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = client.describe_configs([resource])[resource].result(30)
    assert configs["retention.bytes"].value == "1048576"
    assert len(client.list_topics(timeout=10).topics[name].partitions) == 3


def test_describe_broker_configs(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = client.describe_configs([resource])[resource].result(30)
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].is_read_only


def test_replication_throttles_are_dynamic_configs(shared_broker: BrokerProcess) -> None:
    """What `reassign-partitions --throttle` sets: the broker-level rates (kept in the cluster
    metadata, described as dynamic) and the topic-level throttled replica lists."""
    client = admin(shared_broker)
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")

    def alter(resource_type: ConfigResource.Type, name: str, key: str, value: str | None
              ) -> None:
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        resource = ConfigResource(resource_type, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op)])
        client.incremental_alter_configs([resource])[resource].result(30)

    def rate() -> ConfigEntry:
        return client.describe_configs([broker])[broker].result(30)[
            "leader.replication.throttled.rate"]

    assert rate().is_default and not rate().is_read_only
    alter(ConfigResource.Type.BROKER, "0", "leader.replication.throttled.rate", "1000")
    assert (rate().value, rate().source) == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter(ConfigResource.Type.BROKER, "0", "leader.replication.throttled.rate", None)
    assert rate().is_default and rate().value == str(2**63 - 1)
    for key, value, code in (("follower.replication.throttled.rate", "-1",
                              KafkaError.INVALID_CONFIG),
                             ("num.partitions", "3", KafkaError.INVALID_REQUEST)):
        with pytest.raises(KafkaException) as refused:
            alter(ConfigResource.Type.BROKER, "0", key, value)
        assert refused.value.args[0].code() == code

    name = unique("throttled")
    create_topic(shared_broker, name)
    alter(ConfigResource.Type.TOPIC, name, "leader.replication.throttled.replicas", "0:0")
    topic = ConfigResource(ConfigResource.Type.TOPIC, name)
    assert client.describe_configs([topic])[topic].result(30)[
        "leader.replication.throttled.replicas"].value == "0:0"
    with pytest.raises(KafkaException) as refused:
        alter(ConfigResource.Type.TOPIC, name, "follower.replication.throttled.replicas", "x")
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_list_topics_and_cluster(shared_broker: BrokerProcess) -> None:
    name = unique("listed")
    create_topic(shared_broker, name, 2)
    client = admin(shared_broker)
    metadata = client.list_topics(timeout=10)
    assert name in metadata.topics
    assert list(metadata.brokers) == [0]
    partition = metadata.topics[name].partitions[1]
    assert (partition.leader, partition.replicas, partition.isrs) == (0, [0], [0])
    cluster = client.describe_cluster().result(30)
    assert cluster.controller.id == 0
    assert [n.port for n in cluster.nodes] == [shared_broker.port]


def test_auto_create_on_produce_uses_num_partitions(broker_factory) -> None:
    broker = broker_factory({"num.partitions": "3"})
    name = unique("auto")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, value=b"hello")
    assert producer.flush(30) == 0
    assert len(admin(broker).list_topics(timeout=10).topics[name].partitions) == 3


def test_auto_create_disabled_fails_unknown_topic(broker_factory) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    producer.produce(unique("missing"), value=b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] in ([KafkaError.UNKNOWN_TOPIC_OR_PART],
                                          [KafkaError._MSG_TIMED_OUT])


def test_message_too_large_is_rejected(broker_factory) -> None:
    broker = broker_factory({"message.max.bytes": "10000"})
    name = unique("big")
    create_topic(broker, name)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100000})
    producer.produce(name, value=b"x" * 50_000, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]


def test_data_survives_restart_and_clients_keep_working(broker: BrokerProcess) -> None:
    name = unique("durable")
    create_topic(broker, name)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(30) == 0
    broker.restart()
    for i in range(50, 100):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(60) == 0
    got = consume_all(broker, [TopicPartition(name, 0, OFFSET_BEGINNING)], 100)
    assert [int(m.value()) for m in got] == list(range(100))


def test_data_survives_sigkill(broker: BrokerProcess) -> None:
    name = unique("crash")
    create_topic(broker, name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(30) == 0
    broker.kill()
    broker.start()
    got = consume_all(broker, [TopicPartition(name, 0, OFFSET_BEGINNING)], 200)
    assert [int(m.value()) for m in got] == list(range(200))


def test_deleting_a_topic_removes_its_committed_offsets(shared_broker: BrokerProcess) -> None:
    client = admin(shared_broker)
    name, group = unique("gone"), unique("g")
    create_topic(shared_broker, name)
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(name, 0, 5)], asynchronous=False)
        assert consumer.committed([TopicPartition(name, 0)], timeout=10)[0].offset == 5
        client.delete_topics([name])[name].result(30)
        create_topic(shared_broker, name)
        assert consumer.committed([TopicPartition(name, 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()


def test_a_second_broker_on_the_same_data_dir_is_refused(broker: BrokerProcess) -> None:
    second = BrokerProcess(broker.data_dir, broker.log_path.with_name("second.log"))
    with pytest.raises(RuntimeError) as refused:
        second.start()
    assert "another broker process is using the data directory" in str(refused.value)
    producer = Producer({"bootstrap.servers": broker.bootstrap})  # the first one is unharmed
    producer.produce(unique("still-up"), value=b"x")
    assert producer.flush(30) == 0
