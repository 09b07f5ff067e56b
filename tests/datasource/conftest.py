"""Fixtures for the pylog tests: one local Spark session for the whole run, helpers to create
topics and produce records with confluent-kafka (outside Spark)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_log

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pylog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark_log.register(session)
    yield session
    session.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, config=config or {})])[name].result(30)
    return name


def produce(broker: BrokerProcess, topic: str, values: list[bytes | str],
            keys: list[bytes | str | None] | None = None, partition: int | None = None,
            timestamps: list[int] | None = None,
            headers: list[list[tuple[str, bytes]]] | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    for i, value in enumerate(values):
        kwargs = {}
        if keys is not None and keys[i] is not None:
            kwargs["key"] = keys[i]
        if partition is not None:
            kwargs["partition"] = partition
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        if headers is not None:
            kwargs["headers"] = headers[i]
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
