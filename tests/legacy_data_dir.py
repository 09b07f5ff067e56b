"""Turn a data directory a node wrote into one as brokers kept it before the cluster metadata
log: no __cluster_metadata-0, the topics in topics.json, the producer-id block end in its file —
what a single node's first start imports."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path


def as_before_the_metadata_log(data: Path, block_end: int = 1000) -> None:
    if not (data / "__cluster_metadata-0").exists():
        return
    shutil.rmtree(data / "__cluster_metadata-0")
    counts: dict[str, int] = {}
    for path in data.iterdir():
        topic, _, partition = path.name.rpartition("-")
        if path.is_dir() and partition.isdigit():
            counts[topic] = max(counts.get(topic, 0), int(partition) + 1)
    internal = {"__consumer_offsets", "__transaction_state"}
    (data / "topics.json").write_text(json.dumps({"version": 1, "topics": [
        {"name": name, "id": str(uuid.uuid4()), "partitions": count,
         "configs": {"cleanup.policy": "compact"} if name in internal else {}}
        for name, count in sorted(counts.items())]}))
    (data / "producer-id-block").write_text(f"{block_end}\n")
