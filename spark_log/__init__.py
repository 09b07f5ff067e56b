"""spark_log: a Kafka-compatible event log in Python, and the pylog PySpark data source."""

from __future__ import annotations

from typing import Any

from spark_log.kio_import import load_kio_without_hypothesis

load_kio_without_hypothesis()  # before any module loads the codecs (see kio_import)

__version__ = "0.1.0"

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, filter_pushdown: bool = False) -> None:
    """Register the `pylog` data source with `spark`.

    `filter_pushdown=True` also turns on Spark's Python filter pushdown (the session conf
    spark.sql.python.filterPushdown.enabled), so batch reads filtered on partition, offset or
    timestamp read only the matching offsets. It is off by default because Spark 4.3 caches a
    pushed-down scan's plan on the DataFrame it came from: after `df.filter(...).count()`, a
    plain `df.count()` reuses the filtered ranges. With pushdown on, build every filtered query
    from a fresh `spark.read...load()`.
    """
    from spark_log.datasource import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
