"""Counter and histogram families kept as plain numbers, exposed to Prometheus at scrape time.

prometheus_client's Counter and Histogram take a lock and walk their buckets in Python on every
`inc` and `observe`; a broker's request path calls them several times a request. These series
are updated only on the broker's event loop (as the registry is scraped there too), so an update
is a dict lookup and an add, and the scrape builds the same families the client's own types
expose (`<name>_total` with `<name>_created`; `_bucket`, `_count`, `_sum`, `_created`).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class CounterSeries:
    """One labelled counter family. Invariant: a label value has a series from its first `inc`
    until `remove`, and its total never decreases meanwhile."""

    def __init__(self, name: str, doc: str, label: str,
                 label_text: Callable[[Hashable], str] = str) -> None:
        self.name, self.doc, self.label, self._text = name, doc, label, label_text
        self._values: dict[Hashable, list[float]] = {}  # label value -> [total, created]

    def inc(self, key: Hashable, amount: float = 1) -> None:
        value = self._values.get(key)
        if value is None:
            value = self._values[key] = [0, time.time()]
        value[0] += amount

    def remove(self, key: Hashable) -> None:
        self._values.pop(key, None)

    def total(self, key: Hashable) -> float:
        value = self._values.get(key)
        return 0 if value is None else value[0]

    def collect(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.doc, labels=[self.label])
        for key, (total, created) in self._values.items():
            family.add_metric([self._text(key)], total, created=created)
        return family


class HistogramSeries:
    """One labelled histogram family with fixed upper bounds (inclusive, as Prometheus's `le`).
    Invariant: per label value, the bucket counts sum to the observation count."""

    def __init__(self, name: str, doc: str, label: str, bounds: Sequence[float],
                 label_text: Callable[[Hashable], str] = str) -> None:
        self.name, self.doc, self.label, self._text = name, doc, label, label_text
        self._bounds = tuple(float(b) for b in bounds)
        self._values: dict[Hashable, list] = {}  # label value -> [counts, sum, created]

    def observe(self, key: Hashable, amount: float) -> None:
        value = self._values.get(key)
        if value is None:
            value = self._values[key] = [[0] * (len(self._bounds) + 1), 0.0, time.time()]
        value[0][bisect_left(self._bounds, amount)] += 1
        value[1] += amount

    def collect(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.doc, labels=[self.label])
        uppers = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        for key, (counts, total, created) in self._values.items():
            label = self._text(key)
            cumulative, buckets = 0, []
            for upper, count in zip(uppers, counts, strict=True):
                cumulative += count
                buckets.append((upper, cumulative))
            family.add_metric([label], buckets, total)
            family.add_sample(self.name + "_created", {self.label: label}, created)
        return family


class SeriesCollector(Collector):
    """Exposes the series it holds in the registry it is registered with."""

    def __init__(self, series: Iterable[CounterSeries | HistogramSeries]) -> None:
        self._series = list(series)

    def collect(self) -> list[CounterMetricFamily | HistogramMetricFamily]:
        return [s.collect() for s in self._series]
