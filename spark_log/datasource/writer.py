"""Batch writes: Arrow batches -> Kafka records, through an idempotent producer.

`validate_write_schema` applies Spark's Kafka sink rules on the driver: `value` is required
(string or binary), `key` optional (string or binary), `topic` comes from the `topic` option
(which wins over a column) or a string `topic` column, `partition` (int) and `headers`
(array<struct<key:string,value:binary>>) are optional. With keyFormat/valueFormat=avro the key
or value column is a struct encoded with the Avro schema. Tasks produce with
`enable.idempotence=true` and `acks=all`; keys are partitioned by murmur2 like the Java client.

Delivery is at-least-once: a task retried by Spark produces its rows again. Each task returns a
`PylogCommitMessage` (rows and the last offset per partition). Exactly-once streaming writes
run the same task loop inside one transaction per task and commit or abort on the driver
(`stream_writer`, `txn_task`, `txn_commit`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .errors import PylogOptionError
from .options import SinkOptions

log = logging.getLogger(__name__)

POLL_EVERY = 5_000
FLUSH_TIMEOUT_S = 300.0


@dataclass
class PylogCommitMessage(WriterCommitMessage):
    """What one task wrote: row count and the highest offset per (topic, partition)."""

    rows: int = 0
    last_offsets: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class WritePlan:
    """Everything a task needs; built and checked on the driver. Invariant: `topic` is set or
    the input has a string `topic` column; `bootstrap` is a resolved address."""

    bootstrap: str
    kafka_conf: dict[str, str]
    topic: str | None
    has_key: bool
    has_partition: bool
    has_headers: bool
    key_schema: str | None = None
    value_schema: str | None = None
    key_schema_id: int | None = None
    value_schema_id: int | None = None


def _type_name(dtype: Any) -> str:
    return dtype.simpleString()


def validate_write_schema(schema: Any, opts: SinkOptions) -> None:
    """Spark's Kafka sink schema rules, with its messages."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}
    if opts.topic is None:
        if "topic" not in fields:
            raise PylogOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic.")
        if not isinstance(fields["topic"], T.StringType):
            raise PylogOptionError(
                f"topic attribute unsupported type {_type_name(fields['topic'])}. topic must be "
                "a(n) string")
    if "value" not in fields:
        raise PylogOptionError("Required attribute 'value' not found")
    _check_payload("value", fields["value"], opts.avro.value_format == "avro")
    if "key" in fields:
        _check_payload("key", fields["key"], opts.avro.key_format == "avro")
    if "partition" in fields and not isinstance(fields["partition"], T.IntegerType):
        raise PylogOptionError(
            f"partition attribute unsupported type {_type_name(fields['partition'])}. partition "
            "must be a(n) int")
    if "headers" in fields and not _is_headers(fields["headers"]):
        raise PylogOptionError(
            f"headers attribute unsupported type {_type_name(fields['headers'])}. headers must "
            "be a(n) array<struct<key:string,value:binary>>")


def _check_payload(name: str, dtype: Any, avro: bool) -> None:
    from pyspark.sql import types as T

    if avro:
        return
    if not isinstance(dtype, T.StringType | T.BinaryType):
        raise PylogOptionError(
            f"{name} attribute unsupported type {_type_name(dtype)}. {name} must be a(n) "
            "string or binary")


def _is_headers(dtype: Any) -> bool:
    from pyspark.sql import types as T

    if not isinstance(dtype, T.ArrayType) or not isinstance(dtype.elementType, T.StructType):
        return False
    inner = {f.name: f.dataType for f in dtype.elementType.fields}
    return (set(inner) == {"key", "value"} and isinstance(inner["key"], T.StringType)
            and isinstance(inner["value"], T.BinaryType | T.StringType))


def make_plan(schema: Any, opts: SinkOptions, bootstrap: str) -> WritePlan:
    names = set(schema.fieldNames())
    return WritePlan(
        bootstrap=bootstrap, kafka_conf=dict(opts.client.kafka_conf), topic=opts.topic,
        has_key="key" in names, has_partition="partition" in names,
        has_headers="headers" in names,
        key_schema=opts.avro.key_schema if opts.avro.key_format == "avro" else None,
        value_schema=opts.avro.value_schema if opts.avro.value_format == "avro" else None,
        key_schema_id=opts.avro.key_schema_id, value_schema_id=opts.avro.value_schema_id)


class PylogBatchWriter(DataSourceArrowWriter):
    """df.write.format("pylog"): every task produces its rows; the driver logs the totals."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> PylogCommitMessage:
        return produce_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PylogCommitMessage))
        log.info("pylog wrote %d records", rows)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PylogCommitMessage))
        log.warning("pylog write aborted; %d records already written stay in the log", rows)


# ---- the task loop -----------------------------------------------------------------------


class Deliveries:
    """Delivery reports: the first error and the highest offset per partition."""

    def __init__(self) -> None:
        self.error: Any = None
        self.failed = 0
        self.last: dict[tuple[str, int], int] = {}

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            if self.error is None:
                self.error = err
            return
        key = (msg.topic(), msg.partition())
        offset = msg.offset()
        if offset > self.last.get(key, -1):
            self.last[key] = offset


def produce_batches(plan: WritePlan, batches: Iterator[Any]) -> PylogCommitMessage:
    from confluent_kafka import Producer

    from .client import producer_conf

    deliveries = Deliveries()
    conf = producer_conf(plan.bootstrap, plan.kafka_conf)
    conf["on_delivery"] = deliveries
    producer = Producer(conf)
    rows = send_batches(producer, plan, batches, deliveries)
    flush(producer, plan, deliveries)
    return PylogCommitMessage(rows, dict(deliveries.last))


def send_batches(producer: Any, plan: WritePlan, batches: Iterator[Any],
                 deliveries: Deliveries) -> int:
    """Produce every row of `batches` (not flushed); stops early at the first delivery error.
    Returns the number of rows handed to the producer."""
    encode_key, encode_value = _encoders(plan)
    rows = 0
    for batch in batches:
        rows += _produce_batch(producer, plan, batch, encode_key, encode_value)
        if deliveries.error is not None:
            break
    return rows


def flush(producer: Any, plan: WritePlan, deliveries: Deliveries) -> None:
    """Wait for every delivery report; raise the first delivery error or a timeout."""
    from confluent_kafka import KafkaException

    left = producer.flush(FLUSH_TIMEOUT_S)
    if deliveries.error is not None:
        raise KafkaException(deliveries.error)
    if left:
        raise TimeoutError(f"{left} records were not acknowledged by {plan.bootstrap} within "
                           f"{FLUSH_TIMEOUT_S:.0f}s")


Encoder = Callable[[Any], list[Any]]


def _encoders(plan: WritePlan) -> tuple[Encoder, Encoder]:
    from .avro import make_encoder

    def raw(column: Any) -> list[Any]:
        import pyarrow as pa

        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.binary())
        return column.to_pylist()

    def avro(schema: str, schema_id: int | None, option: str) -> Encoder:
        encode = make_encoder(schema, schema_id, option)
        return lambda column: encode(column.to_pylist())

    key = avro(plan.key_schema, plan.key_schema_id, "keyAvroSchema") if plan.key_schema \
        else raw
    value = avro(plan.value_schema, plan.value_schema_id, "avroSchema") if plan.value_schema \
        else raw
    return key, value


def _produce_batch(producer: Any, plan: WritePlan, batch: Any, encode_key: Encoder,
                   encode_value: Encoder) -> int:
    n = batch.num_rows
    if n == 0:
        return 0
    names = batch.schema.names
    values = encode_value(batch.column(names.index("value")))
    keys = encode_key(batch.column(names.index("key"))) if plan.has_key else [None] * n
    if plan.topic is not None:
        topics = [plan.topic] * n
    else:
        topics = batch.column(names.index("topic")).to_pylist()
        if None in topics:
            raise ValueError("null topic present in the data. Use the topic option for "
                             "setting a default topic.")
    parts = (batch.column(names.index("partition")).to_pylist() if plan.has_partition
             else None)
    headers = (batch.column(names.index("headers")).to_pylist() if plan.has_headers else None)
    if parts is None and headers is None:
        _send_simple(producer, topics, values, keys)
    else:
        _send_full(producer, topics, values, keys, parts, headers)
    return n


def _send_simple(producer: Any, topics: list[str], values: list[Any], keys: list[Any]) -> None:
    produce = producer.produce
    for i, (topic, value, key) in enumerate(zip(topics, values, keys, strict=True)):
        try:
            produce(topic, value, key)
        except BufferError:
            _wait_for_room(producer, lambda t=topic, v=value, k=key: produce(t, v, k))
        if i % POLL_EVERY == 0:
            producer.poll(0)


def _send_full(producer: Any, topics: list[str], values: list[Any], keys: list[Any],
               parts: list[int | None] | None, headers: list[Any] | None) -> None:
    produce = producer.produce
    for i, (topic, value, key) in enumerate(zip(topics, values, keys, strict=True)):
        kwargs: dict[str, Any] = {}
        if parts is not None and parts[i] is not None:
            kwargs["partition"] = parts[i]
        if headers is not None and headers[i]:
            kwargs["headers"] = [(h["key"], _header_bytes(h["value"])) for h in headers[i]]
        try:
            produce(topic, value, key, **kwargs)
        except BufferError:
            _wait_for_room(producer, lambda t=topic, v=value, k=key, kw=kwargs:
                           produce(t, v, k, **kw))
        if i % POLL_EVERY == 0:
            producer.poll(0)


def _header_bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _wait_for_room(producer: Any, send: Callable[[], None]) -> None:
    while True:
        producer.poll(0.05)
        try:
            send()
            return
        except BufferError:
            continue
