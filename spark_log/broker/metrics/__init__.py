"""The node's Prometheus metrics: counters and histograms updated on the request paths
(`broker_metrics`), gauges of state computed at scrape time (`metrics_state` for the broker,
`quorum_metrics` for the metadata quorum, the controller and the applied metadata), and the
`/metrics` endpoint on the node's event loop (`metrics_server`).

May import group/ and transaction/ value types, storage/, metadata/ and raft/ types, protocol/
and records/; the coordinators themselves are read through the protocols of `metrics_state`.
"""
