"""Windowed clickstream statistics: how they are computed from the raw Kafka records, how they
are written as Kafka records, and how they are read back.

Per event-time window (tumbling, e.g. "1 minute"): `events`, the count of each event type,
`users` (approximate distinct users, HyperLogLog as approx_count_distinct) and `revenue` (the
exact sum of purchase amounts). Late events are accepted until the watermark (the largest
event time seen minus the delay) passes their window; later ones are dropped.

As records: key = the window start (`2024-05-01T12:00:00Z`), value = the JSON of one row. In
update mode a window's record is written again whenever its numbers change, so the latest
record per key is the result (what a compacted topic keeps); `read_latest` reads it so.
"""

from __future__ import annotations

from typing import Any

from jobs.events import EVENT_TYPES, SPARK_SCHEMA

RESULT_SCHEMA = ("window_start TIMESTAMP, window_end TIMESTAMP, events LONG, "
                 + ", ".join(f"{t} LONG" for t in EVENT_TYPES)
                 + ", users LONG, revenue DECIMAL(20,2)")
RESULT_COLUMNS = ("window_start", "window_end", "events", *EVENT_TYPES, "users", "revenue")
KEY_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"


def parse_events(raw: Any) -> Any:
    """Kafka records (pylog's schema) -> one row per well-formed event (SPARK_SCHEMA columns
    plus the record's partition and offset). Values that are not events are left out."""
    from pyspark.sql import functions as F

    parsed = raw.select(F.from_json(F.col("value").cast("string"), SPARK_SCHEMA).alias("e"),
                        "partition", "offset")
    return (parsed.select("e.*", "partition", "offset")
            .where(F.col("event_time").isNotNull() & F.col("event_type").isNotNull()))


def aggregate(events: Any, window: str, watermark: str) -> Any:
    """Events -> one row per event-time window of length `window`, late data accepted up to
    `watermark` (a delay such as "2 minutes")."""
    from pyspark.sql import functions as F

    per_type = [F.count(F.when(F.col("event_type") == t, True)).alias(t) for t in EVENT_TYPES]
    stats = (events.withWatermark("event_time", watermark)
             .groupBy(F.window("event_time", window).alias("window"))
             .agg(F.count(F.lit(1)).alias("events"), *per_type,
                  F.approx_count_distinct("user_id").alias("users"),
                  F.coalesce(F.sum("amount"), F.lit(0).cast("decimal(20,2)")).alias("revenue")))
    return stats.select(F.col("window.start").alias("window_start"),
                        F.col("window.end").alias("window_end"),
                        *[c for c in RESULT_COLUMNS if not c.startswith("window_")])


def to_records(stats: Any) -> Any:
    """Statistics rows -> (key, value) records: key the window start, value the row as JSON."""
    from pyspark.sql import functions as F

    return stats.select(F.date_format("window_start", KEY_FORMAT).alias("key"),
                        F.to_json(F.struct(*RESULT_COLUMNS)).alias("value"))


def read_latest(spark: Any, options: dict[str, str], topic: str) -> Any:
    """The results topic as a batch DataFrame: the latest record per window, decoded, sorted by
    window start. `options` locate the cluster (kafka.bootstrap.servers or dataDir)."""
    from pyspark.sql import functions as F

    raw = spark.read.format("pylog").options(**options).option("subscribe", topic).load()
    latest = raw.groupBy("key").agg(F.max_by("value", F.col("offset")).alias("value"))
    decoded = latest.select(F.from_json(F.col("value").cast("string"), RESULT_SCHEMA).alias("r"))
    return decoded.select("r.*").orderBy("window_start")
