"""`PylogDataSource`: the `pylog` format, a drop-in for Spark's `kafka` format.

It only wires Spark's data source entry points to the modules that do the work: options are
validated here on the driver (`options`), the address is resolved on the driver (`client`), and
the readers and writers come from `reader`, `stream_reader`, `writer` and `stream_writer`.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from .errors import PylogOptionError

PUSHDOWN_WORKER = "data_source_pushdown_filters"
WRITE_PLANNER = "write_into_data_source"  # plans writes; its writer is pickled to the tasks


class PylogDataSource(DataSource):
    """Kafka topics as a Spark DataFrame: Spark's Kafka source and sink, same options and
    schema, on any Kafka cluster or on spark_log's embedded sidecar broker.

    Invariants: options are validated on the driver before any job runs (errors name the
    option); executors receive a resolved broker address, never a data directory; the schema is
    Spark's Kafka source schema (key/value become structs with keyFormat/valueFormat=avro).

    Usage (a broker at localhost:9092; without kafka.bootstrap.servers pylog starts or reuses
    the embedded sidecar broker of ~/.spark_log/data)::

        from pyspark.sql import SparkSession
        import spark_log

        spark = SparkSession.builder.master("local[2]").getOrCreate()
        spark_log.register(spark)
        (spark.createDataFrame([("k1", "v1")], "key string, value string")
            .write.format("pylog").option("kafka.bootstrap.servers", "localhost:9092")
            .option("topic", "events").mode("append").save())
        df = (spark.read.format("pylog").option("kafka.bootstrap.servers", "localhost:9092")
              .option("subscribe", "events").load())
        df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").show()
    """

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self) -> Any:
        from .arrow import spark_schema
        from .avro_options import parse_avro
        from .option_values import parse_bool

        avro = parse_avro(self.options)
        include_headers = parse_bool(self.options, "includeHeaders", False)
        return spark_schema(include_headers, _avro_type(avro.key_format, avro.key_schema,
                                                        "keyAvroSchema"),
                            _avro_type(avro.value_format, avro.value_schema, "avroSchema"))

    def reader(self, schema: Any) -> DataSourceReader:
        from .options import parse_source_options
        from .reader import PylogBatchReader, PylogPushdownReader

        opts = parse_source_options(self.options, streaming=False)
        cls = PylogPushdownReader if _planning_with_pushdown() else PylogBatchReader
        return cls(opts, schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        from .options import parse_source_options
        from .stream_reader import PylogStreamReader

        return PylogStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        from .writer import PylogBatchWriter

        if overwrite:
            raise PylogOptionError(
                "Save mode Overwrite is not allowed for pylog (a Kafka topic is append-only); "
                "use mode('append').")
        return PylogBatchWriter(self._plan(schema))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        from .options import parse_sink_options
        from .stream_writer import PylogStreamWriter, PylogTxnStreamWriter

        opts = parse_sink_options(self.options, streaming=True)
        plan = self._plan(schema, opts)
        if not opts.txn.enabled:
            return PylogStreamWriter(plan)
        writer = PylogTxnStreamWriter(plan, opts.txn)
        if _called_from(WRITE_PLANNER):  # the driver, before a micro-batch's tasks
            writer.prepare()
        return writer

    def _plan(self, schema: Any, opts: Any = None) -> Any:
        from .client import bootstrap_for
        from .options import parse_sink_options
        from .writer import make_plan, validate_write_schema

        opts = opts or parse_sink_options(self.options)
        validate_write_schema(schema, opts)
        return make_plan(schema, opts, bootstrap_for(opts.client))


def _avro_type(fmt: str, schema: str | None, option: str) -> Any:
    if fmt != "avro":
        return None
    from .avro import parse_schema, spark_type

    return spark_type(parse_schema(schema or "", option))


def _planning_with_pushdown() -> bool:
    """True when Spark's filter-pushdown planner (spark.sql.python.filterPushdown.enabled) is
    the caller. Spark refuses a reader that implements pushFilters when pushdown is off, so the
    pushdown-capable reader is only handed to that planner."""
    return _called_from(PUSHDOWN_WORKER)


def _called_from(module: str) -> bool:
    """True when PySpark's worker module `module` is among the callers. PySpark creates
    readers and writers in several worker processes; this tells which one is asking."""
    frame = sys._getframe(1)
    for _ in range(10):
        if frame is None:
            return False
        if frame.f_globals.get("__name__", "").endswith(module):
            return True
        frame = frame.f_back
    return False
