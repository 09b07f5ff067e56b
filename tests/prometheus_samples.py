"""Reading a node's /metrics endpoint in tests: every sample by (name, labels)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape_port(port: int) -> Samples:
    """One scrape of http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def value_or_none(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample, or None while the node does not report it (a series labelled by a topic
    appears once the node has applied that topic's metadata)."""
    return samples.get((name, frozenset(labels.items())))
