"""The broker's Prometheus metrics: counters and histograms updated on the request paths
(`broker_metrics`), gauges of state computed at scrape time (`metrics_state`), and the
`/metrics` endpoint on the broker's event loop (`metrics_server`).

May import group/ and transaction/ value types, storage/ types, protocol/ and records/; the
coordinators themselves are read through the protocols of `metrics_state`.
"""
