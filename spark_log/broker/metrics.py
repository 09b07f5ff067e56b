"""Prometheus metrics of one broker, in a registry of its own (served with `--metrics-port`).

Names follow Kafka's JMX metrics where one exists (BytesInPerSec -> bytes_in_total ...), as
counters and histograms that Prometheus turns into rates. Gauges that describe state (log size,
lag, open transactions, under-replicated partitions) are computed at scrape time from the
broker (`metrics_state`), so they cost nothing on the produce and fetch paths. The registry is
served only by `metrics_server`, on the broker's event loop: the state gauges read broker state
that only that loop may touch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from spark_log.protocol.api_keys import ApiKey

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                    10, 30)

StateReader = Callable[[], Iterable[GaugeMetricFamily]]


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class BrokerMetrics:
    """Counters updated on the request paths; thread-safe (prometheus_client locks)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("spark_log_requests", "Requests handled, by API.",
                                ["api"], registry=r)
        self.request_seconds = Histogram("spark_log_request_seconds",
                                         "Time to handle a request, by API.", ["api"],
                                         buckets=_LATENCY_BUCKETS, registry=r)
        self.bytes_in = Counter("spark_log_bytes_in", "Record bytes produced, by topic.",
                                ["topic"], registry=r)
        self.messages_in = Counter("spark_log_messages_in", "Records produced, by topic.",
                                   ["topic"], registry=r)
        self.bytes_out = Counter("spark_log_bytes_out", "Record bytes fetched, by topic.",
                                 ["topic"], registry=r)
        self.failed_produce = Counter("spark_log_failed_produce_requests",
                                      "Partition appends answered with an error, by topic.",
                                      ["topic"], registry=r)

    def observe_request(self, api_key: int, seconds: float) -> None:
        count, latency = self._per_api(api_key)
        count.inc()
        latency.observe(seconds)

    def record_produce(self, topic: str, size: int, count: int) -> None:
        size_in, messages_in = self._per_topic_in(topic)
        size_in.inc(size)
        messages_in.inc(count)

    def record_fetch(self, topic: str, size: int) -> None:
        if size:
            self._per_topic_out(topic).inc(size)

    # labels() costs a lock and a lookup; these run on every request, so the children are
    # looked up once per API or topic.
    @functools.cache  # noqa: B019 - one BrokerMetrics per broker, kept for its lifetime
    def _per_api(self, api_key: int) -> tuple[Any, Any]:
        name = api_name(api_key)
        return self.requests.labels(name), self.request_seconds.labels(name)

    @functools.cache  # noqa: B019
    def _per_topic_in(self, topic: str) -> tuple[Any, Any]:
        return self.bytes_in.labels(topic), self.messages_in.labels(topic)

    @functools.cache  # noqa: B019
    def _per_topic_out(self, topic: str) -> Any:
        return self.bytes_out.labels(topic)

    def add_state(self, read: StateReader) -> None:
        """Gauges computed at scrape time by `read()`."""
        self.registry.register(_StateCollector(read))


class _StateCollector(Collector):
    def __init__(self, read: StateReader) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return list(self._read())
