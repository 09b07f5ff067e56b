"""Prometheus metrics of one broker, in a registry of its own (served with `--metrics-port`).

Names follow Kafka's JMX metrics where one exists (BytesInPerSec -> bytes_in_total ...), as
counters and histograms that Prometheus turns into rates; records out per topic, which Kafka
does not count, are summed from the headers of the batches a fetch returns. Per-topic series
go when their topic is deleted (`forget_topics`). Gauges that describe state (log size,
lag, open transactions, under-replicated partitions) are computed at scrape time from the
broker (`metrics_state`), so they cost nothing on the produce and fetch paths. The registry is
served only by `metrics_server`, on the broker's event loop: the state gauges read broker state
that only that loop may touch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from spark_log.broker.metrics.metric_series import CounterSeries, HistogramSeries, SeriesCollector
from spark_log.protocol.api_keys import ApiKey
from spark_log.records.batch_header import HEADER_SIZE, LOG_OVERHEAD

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                    10, 30)

StateReader = Callable[[], Iterable[GaugeMetricFamily]]

_INT32 = struct.Struct(">i").unpack_from
_LENGTH_POS, _RECORDS_COUNT_POS = 8, 57  # in a v2 batch header (see records.batch_header)


def records_in(records: Any) -> int:
    """Records in whole v2 batches (bytes, or a storage file slice), summed from each header's
    records count: two fields read per batch, as a fetch returns up to thousands of them."""
    if isinstance(records, bytes | bytearray | memoryview):
        data = records
    else:  # a file slice: the bytes a small read already holds, not a copy of them
        data = records.data if records.data is not None else records.read_bytes()
    count = pos = 0
    last_header = len(data) - HEADER_SIZE
    while pos <= last_header:
        size = LOG_OVERHEAD + _INT32(data, pos + _LENGTH_POS)[0]
        if size < HEADER_SIZE:  # not a batch: count no further
            break
        count += _INT32(data, pos + _RECORDS_COUNT_POS)[0]
        pos += size
    return count


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class BrokerMetrics:
    """Counters updated on the request paths, all on the broker's event loop.

    Invariants: a topic has per-topic series from its first produce, fetch or failed append
    until `forget_topics`, which the broker calls when it deletes the topic, so a deleted
    topic leaves the scrape (a topic created again under its name starts from zero). Records
    out are counted from the batch headers of what a fetch returns, a walk that only a broker
    serving its metrics pays for (`count_records_out`, set by `metrics_server`).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = CounterSeries("spark_log_requests", "Requests handled, by API.", "api",
                                      api_name)
        self.request_seconds = HistogramSeries("spark_log_request_seconds",
                                               "Time to handle a request, by API.", "api",
                                               _LATENCY_BUCKETS, api_name)
        self.bytes_in = CounterSeries("spark_log_bytes_in", "Record bytes produced, by topic.",
                                      "topic")
        self.messages_in = CounterSeries("spark_log_messages_in", "Records produced, by topic.",
                                         "topic")
        self.bytes_out = CounterSeries("spark_log_bytes_out", "Record bytes fetched, by topic.",
                                       "topic")
        self.messages_out = CounterSeries("spark_log_messages_out", "Records fetched, by topic.",
                                          "topic")
        self.failed_produce = CounterSeries(
            "spark_log_failed_produce_requests",
            "Partition appends answered with an error, by topic.", "topic")
        self.count_records_out = False
        self._per_topic = (self.bytes_in, self.messages_in, self.bytes_out, self.messages_out,
                           self.failed_produce)
        self.registry.register(SeriesCollector((self.requests, self.request_seconds,
                                                *self._per_topic)))

    def observe_request(self, api_key: int, seconds: float) -> None:
        self.requests.inc(api_key)
        self.request_seconds.observe(api_key, seconds)

    def record_produce(self, topic: str, size: int, count: int) -> None:
        self.bytes_in.inc(topic, size)
        self.messages_in.inc(topic, count)

    def record_failed_produce(self, topic: str) -> None:
        self.failed_produce.inc(topic)

    def record_fetch(self, topic: str, partitions_records: Sequence[Sized]) -> None:
        """What one fetch returns for `topic`: the records of each partition (bytes or a file
        slice of whole batches)."""
        size = 0
        for records in partitions_records:
            size += len(records)
        if not size:
            return
        self.bytes_out.inc(topic, size)
        if self.count_records_out:
            self.messages_out.inc(topic, sum(records_in(r) for r in partitions_records if len(r)))

    def forget_topics(self, topics: Iterable[str]) -> None:
        """Drop the per-topic series of deleted topics."""
        for topic in topics:
            for series in self._per_topic:
                series.remove(topic)

    def add_state(self, read: StateReader) -> None:
        """Gauges computed at scrape time by `read()`."""
        self.registry.register(StateCollector(read))


class StateCollector(Collector):
    """Gauges computed by `read()` at each scrape."""

    def __init__(self, read: StateReader) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return list(self._read())
