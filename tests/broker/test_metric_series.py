"""The broker's plain-number series expose exactly what prometheus_client's own Counter and
Histogram expose for the same updates (creation times aside)."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from spark_log.broker.metrics.metric_series import CounterSeries, HistogramSeries, SeriesCollector

BOUNDS = (0.0005, 0.001, 0.01, 0.5, 1, 30)
OBSERVED = {"FETCH": [0.0005, 0.0004, 0.002, 0.5, 0.50001, 31.0, 0.0],
            "PRODUCE": [1, 1, 29.9]}
INCREMENTS = {"orders": [1, 5, 2.5], "payments": [7], "gone": [3]}


def _without_created(text: bytes) -> str:
    return "\n".join(line for line in text.decode().splitlines() if "_created" not in line)


def _created_lines(text: bytes) -> list[str]:
    return [re.sub(r" \S+$", "", line) for line in text.decode().splitlines()
            if "_created" in line]


def test_the_exposition_equals_prometheus_clients() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("demo_bytes", "Bytes, by topic.", ["topic"], registry=theirs)
    histogram = Histogram("demo_seconds", "Time, by API.", ["api"], buckets=BOUNDS,
                          registry=theirs)
    names = {1: "FETCH", 0: "PRODUCE"}
    series = CounterSeries("demo_bytes", "Bytes, by topic.", "topic")
    timing = HistogramSeries("demo_seconds", "Time, by API.", "api", BOUNDS, names.__getitem__)
    ours.register(SeriesCollector([series, timing]))
    for topic, amounts in INCREMENTS.items():
        for amount in amounts:
            counter.labels(topic).inc(amount)
            series.inc(topic, amount)
    for key, api in names.items():
        for seconds in OBSERVED[api]:
            histogram.labels(api).observe(seconds)
            timing.observe(key, seconds)
    counter.remove("gone")
    series.remove("gone")
    assert _without_created(generate_latest(ours)) == _without_created(generate_latest(theirs))
    assert _created_lines(generate_latest(ours)) == _created_lines(generate_latest(theirs))
    assert series.total("orders") == 8.5 and series.total("gone") == 0
