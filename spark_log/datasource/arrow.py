"""The Kafka source's schema, and consumed messages -> `pyarrow.RecordBatch` (the hot path).

The schema is Spark's Kafka source schema: key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int, and headers
array<struct<key:string,value:binary>> with includeHeaders=true. Arrow batches carry exactly the
Arrow types Spark expects (timestamps as `timestamp[us, tz=UTC]`). Conversion works on a whole
list of messages of one partition at a time: one pass per column with list comprehensions over
the C-level message accessors, and vectorised arithmetic for timestamps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS = pa.list_(HEADER)
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")

# librdkafka's timestamp types -> Kafka's TimestampType ids, as Spark reports them.
_TS_TYPE = {0: -1, 1: 0, 2: 1}

Decoder = Callable[[list[Any]], list[Any]]


def spark_schema(include_headers: bool = False, key_type: DataType | None = None,
                 value_type: DataType | None = None) -> StructType:
    from pyspark.sql import types as T

    fields = [
        T.StructField("key", key_type or T.BinaryType(), True),
        T.StructField("value", value_type or T.BinaryType(), True),
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("offset", T.LongType(), True),
        T.StructField("timestamp", T.TimestampType(), True),
        T.StructField("timestampType", T.IntegerType(), True),
    ]
    if include_headers:
        fields.append(T.StructField("headers", T.ArrayType(T.StructType([
            T.StructField("key", T.StringType(), True),
            T.StructField("value", T.BinaryType(), True)]), True), True))
    return T.StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """Spark's Arrow schema for `schema` (timestamps in UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class BatchBuilder:
    """Turns lists of messages of one topic-partition into record batches of `schema`.

    Invariant: every batch it returns has exactly `self.schema` (names, types, order).
    """

    def __init__(self, schema: StructType, include_headers: bool,
                 key_decoder: Decoder | None = None,
                 value_decoder: Decoder | None = None) -> None:
        self.schema = arrow_schema(schema)
        self.include_headers = include_headers
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._key_type = self.schema.field("key").type
        self._value_type = self.schema.field("value").type

    def build(self, topic: str, partition: int, msgs: Sequence[Any]) -> pa.RecordBatch:
        from confluent_kafka import Message

        n = len(msgs)
        keys: list[Any] = list(map(Message.key, msgs))
        values: list[Any] = list(map(Message.value, msgs))
        if self.key_decoder is not None:
            keys = self.key_decoder(keys)
        if self.value_decoder is not None:
            values = self.value_decoder(values)
        types, stamps = zip(*map(Message.timestamp, msgs), strict=True)
        columns = [
            pa.array(keys, self._key_type),
            pa.array(values, self._value_type),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(list(map(Message.offset, msgs)), pa.int64()),
            _timestamps(stamps, types),
            _timestamp_types(types, n),
        ]
        if self.include_headers:
            columns.append(pa.array([_headers(h) for h in map(Message.headers, msgs)], HEADERS))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


    def build_columns(self, topic: str, partition: int, cols: Any, lo: int, hi: int
                      ) -> pa.RecordBatch:
        """Records lo..hi (indexes) of decoded `columnar.Columns` as a batch of the schema."""
        n = hi - lo
        keys: Any = cols.keys.slice(lo, n)
        values: Any = cols.values.slice(lo, n)
        if self.key_decoder is not None:
            keys = pa.array(self.key_decoder(keys.to_pylist()), self._key_type)
        if self.value_decoder is not None:
            values = pa.array(self.value_decoder(values.to_pylist()), self._value_type)
        stamps = pa.array(cols.timestamps[lo:hi] * 1000, pa.int64()).cast(TIMESTAMP)
        types = cols.timestamp_types[lo:hi]
        columns = [
            keys, values,
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(cols.offsets[lo:hi], pa.int64()),
            stamps,
            pa.array(types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array([[{"key": k, "value": v} for k, v in h]
                                     for h in cols.headers[lo:hi]], HEADERS))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _timestamps(stamps: Sequence[int], types: Sequence[int]) -> pa.Array:
    """Milliseconds -> timestamp[us, UTC]; null where the record has no timestamp."""
    import pyarrow.compute as pc

    millis = pa.array(stamps, pa.int64())
    if 0 in types:
        millis = pc.if_else(pc.equal(pa.array(types, pa.int8()), 0), None, millis)
    return pc.multiply(millis, 1000).cast(TIMESTAMP)


def _timestamp_types(types: Sequence[int], n: int) -> pa.Array:
    first = types[0]
    if types.count(first) == n:
        return pa.repeat(pa.scalar(_TS_TYPE[first], pa.int32()), n)
    return pa.array([_TS_TYPE[t] for t in types], pa.int32())


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict[str, Any]]:
    if not headers:
        return []
    return [{"key": k, "value": v} for k, v in headers]
