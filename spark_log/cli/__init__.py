"""spark_log.cli: the `spark-log` command (topics, groups, produce, consume, perf, dump-log, the
sidecar, storage, and `broker`).

May import client/, storage/ (dump-log reads and `storage` formats data directories offline),
node_config/ (a node's settings, for `storage`), records/, the sidecar and the small top-level
helpers; the broker only through the wire, except `main`, which runs one
for `spark-log broker`, and dump-log's decoders of the coordinators' records (listed in the
import-linter contract in pyproject.toml).
"""
