"""pylog: the PySpark data source for Kafka topics (format "pylog", Spark's Kafka options).

`PylogDataSource` is the entry point; `spark_log.register(spark)` registers it. One module per
concern: options (validation), offsets (Spark's offset JSON), resolve (specs -> offsets),
planner (ranges, splitting, admission control), client (Kafka access), filters (pushdown),
arrow (schema and conversion), range_reader (executor reads), reader / stream_reader, writer /
stream_writer, group_offsets (consumer group commits), avro.

May import client/, protocol/, records/ and the sidecar; never the broker or storage: it reaches
a broker, embedded or not, through the wire.
"""

from .source import PylogDataSource

__all__ = ["PylogDataSource"]
