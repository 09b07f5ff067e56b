"""CreatePartitions and DeleteRecords on the internal topics through confluent-kafka's AdminClient,
against the real broker process: `__consumer_offsets` and `__transaction_state` keep their
partition count (coordinators hash ids onto it) and their records (the coordinators' state),
each refusal is INVALID_TOPIC_EXCEPTION, other topics in the same request still grow or shrink,
and groups and transactions carry on where they were."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.broker_process import BrokerProcess

TIMEOUT_S = 30
INTERNAL = ["__consumer_offsets", "__transaction_state"]


def partition_counts(admin: AdminClient) -> dict[str, int]:
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


@pytest.fixture
def setup(broker: BrokerProcess) -> tuple[AdminClient, Consumer, Producer]:
    """The broker with both internal topics in use: a group that committed offset 7 of
    orders-0, and a transactional producer that committed one transaction."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 1)])["orders"].result(TIMEOUT_S)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("orders", 0, 7)], asynchronous=False)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(TIMEOUT_S)
    commit_one_transaction(producer)
    return admin, consumer, producer


def commit_one_transaction(producer: Producer) -> None:
    producer.begin_transaction()
    producer.produce("orders", value=b"in a transaction", partition=0)
    producer.commit_transaction(TIMEOUT_S)


def refusal(admin: AdminClient, topic: str, count: int, validate_only: bool) -> KafkaError:
    future = admin.create_partitions([NewPartitions(topic, count)],
                                     validate_only=validate_only)[topic]
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT_S)
    return raised.value.args[0]


@pytest.mark.parametrize("validate_only", [False, True])
def test_internal_topics_keep_their_partition_count(
        setup: tuple[AdminClient, Consumer, Producer], validate_only: bool) -> None:
    admin, consumer, producer = setup
    before = partition_counts(admin)
    for topic in INTERNAL:
        error = refusal(admin, topic, before[topic] + 1, validate_only)
        assert error.code() == KafkaError.TOPIC_EXCEPTION, error
        assert f"internal topic {topic} cannot be changed" in error.str(), error
    assert partition_counts(admin) == before
    # The group still finds its offset and the producer its transaction state.
    assert consumer.committed([TopicPartition("orders", 0)], TIMEOUT_S)[0].offset == 7
    commit_one_transaction(producer)
    consumer.close()


def test_other_topics_in_the_same_request_still_grow(
        setup: tuple[AdminClient, Consumer, Producer], broker: BrokerProcess) -> None:
    admin, consumer, _ = setup
    before = partition_counts(admin)
    futures = admin.create_partitions([NewPartitions("orders", 3),
                                       NewPartitions("__consumer_offsets",
                                                     before["__consumer_offsets"] + 5)])
    futures["orders"].result(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        futures["__consumer_offsets"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    after = partition_counts(admin)
    assert after["orders"] == 3
    assert after["__consumer_offsets"] == before["__consumer_offsets"]
    extra = before["__consumer_offsets"]
    assert not (broker.data_dir / f"__consumer_offsets-{extra}").exists()
    consumer.close()


def test_delete_records_on_internal_topics_is_refused_and_deletes_nothing(
        setup: tuple[AdminClient, Consumer, Producer], broker: BrokerProcess) -> None:
    admin, consumer, producer = setup
    counts = partition_counts(admin)
    internal = [TopicPartition(topic, p, -1) for topic in INTERNAL for p in range(counts[topic])]
    before = {(tp.topic, tp.partition): watermarks(consumer, tp) for tp in internal}
    assert any(high > 0 for _, high in before.values())
    futures = admin.delete_records([*internal, TopicPartition("orders", 0, 1)])
    for tp in internal:
        with pytest.raises(KafkaException) as raised:
            futures[tp].result(TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.TOPIC_EXCEPTION, tp
    assert futures[TopicPartition("orders", 0, 1)].result(TIMEOUT_S).low_watermark == 1
    assert {(tp.topic, tp.partition): watermarks(consumer, tp) for tp in internal} == before
    assert consumer.committed([TopicPartition("orders", 0)], TIMEOUT_S)[0].offset == 7
    commit_one_transaction(producer)
    consumer.close()


def watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    return consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition),
                                          timeout=TIMEOUT_S)
