"""A data directory from before the cluster metadata log — topics in topics.json, the producer-id
block end in producer-id-block, no __cluster_metadata-0 — started as the single node: its topics
come back with their ids, partition counts and configs, every record is still there, and
producer ids start past the block end, so none is handed out twice.
"""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

TOPIC_ID = uuid.UUID("6f1c7b7e-2b7d-4a43-9d1e-5a8c1e0f3b21")
BLOCK_END = 7000


def legacy_directory(data: Path) -> None:
    """Partition directories with records for topic `kept` (2 partitions), as a broker before
    the metadata log left them, with topics.json and producer-id-block."""
    broker = BrokerProcess(data, data.parent / "first.log").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        from confluent_kafka.admin import NewTopic

        admin.create_topics([NewTopic("kept", 2, 1)])["kept"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for n in range(20):
            producer.produce("kept", f"v{n}".encode(), partition=n % 2)
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0
    shutil.rmtree(data / "__cluster_metadata-0")
    (data / "topics.json").write_text(json.dumps({"version": 1, "topics": [
        {"name": "kept", "id": str(TOPIC_ID), "partitions": 2,
         "configs": {"retention.ms": "123456789", "cleanup.policy": "delete"}}]}))
    (data / "producer-id-block").write_text(f"{BLOCK_END}\n")


def test_a_directory_from_before_the_metadata_log_keeps_its_topics(tmp_path: Path) -> None:
    data = tmp_path / "data"
    legacy_directory(data)
    broker = BrokerProcess(data, tmp_path / "second.log").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        (described,) = admin.describe_topics(TopicCollection(["kept"])).values()
        topic = described.result(30)
        kafka_form = base64.urlsafe_b64encode(TOPIC_ID.bytes).rstrip(b"=").decode()
        assert str(topic.topic_id) == kafka_form and len(topic.partitions) == 2
        (configs,) = admin.describe_configs([ConfigResource("topic", "kept")]).values()
        entries = configs.result(30)
        assert entries["retention.ms"].value == "123456789"
        assert not entries["retention.ms"].is_default
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("kept", p, 0) for p in range(2)])
        values = []
        for _ in range(200):
            if len(values) == 20:
                break
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        consumer.close()
        assert sorted(values) == sorted(f"v{n}" for n in range(20))
        with RawClient(broker.bootstrap) as raw:
            response = raw.request(22, 4, {"transactional_id": None,
                                           "transaction_timeout": 60000,
                                           "producer_id": -1, "producer_epoch": -1})
        assert response.error_code == 0 and response.producer_id >= BLOCK_END
    finally:
        assert broker.stop() == 0, broker.log()
    assert "kept" in (data / "topics.json").read_text()  # left in place, no longer read
