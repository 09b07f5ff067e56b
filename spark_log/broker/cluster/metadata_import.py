"""What a data directory kept before its node had a metadata log — `topics.json` (names, ids,
partition counts, configs) and `producer-id-block` (the end of the producer ids handed out) —
as metadata records, so the single node's first start on such a directory carries its topics
into the cluster metadata with their ids, and hands out no producer id twice.

The records go in the bootstrap batch, which is written only when the metadata log is empty:
after that the log is what counts and the two files are read no more (they are left in place).
Each partition is imported with this node as its only replica and ISR and no leader, at leader
epoch 0 (the epoch its batches carry); the node's registration elects it, at epoch 1.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from pathlib import Path

from spark_log.metadata import MetadataRecord
from spark_log.metadata.metadata_topic import METADATA_TOPIC
from spark_log.metadata.records import (
    ConfigRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
)
from spark_log.storage.data_dir import producer_id_block, topics_file
from spark_log.storage.log.partition_dir import parse_partition_dir

__all__ = ["import_records"]

log = logging.getLogger(__name__)

# A partition directory no topics.json entry names is adopted (its records are kept and served):
# with default configs, but an internal topic with the configs it is always created with.
_ADOPTED_CONFIGS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer"},
    "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed"},
}

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
NO_LEADER = -1


def import_records(data_dir: Path, node_id: int) -> list[MetadataRecord]:
    """The records for the topics and producer ids `data_dir` holds (none for a new one);
    ConfigError, as at every start, when one of the files is damaged."""
    records: list[MetadataRecord] = []
    for topic in _topics(data_dir):
        records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
        records.extend(
            PartitionRecord(partition_id=p, topic_id=topic.topic_id, replicas=(node_id,),
                            isr=(node_id,), leader=NO_LEADER, leader_epoch=0, partition_epoch=0)
            for p in range(topic.partitions))
        records.extend(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic.name,
                                    name=key, value=value)
                       for key, value in sorted(topic.configs.items()))
    block_end = producer_id_block.read_block_end(data_dir / producer_id_block.FILE_NAME)
    if block_end > 0:
        records.append(ProducerIdsRecord(broker_id=node_id, broker_epoch=-1,
                                         next_producer_id=block_end))
    return records


def _topics(data_dir: Path) -> list[topics_file.TopicInfo]:
    """topics.json's topics, and those whose partition directories it does not list."""
    listed = {t.name: t for t in topics_file.read_topics_file(data_dir / topics_file.FILE_NAME)}
    counts: dict[str, int] = {}
    for entry in data_dir.iterdir() if data_dir.is_dir() else ():
        found = parse_partition_dir(entry.name) if entry.is_dir() else None
        if found is not None and found[0] != METADATA_TOPIC:
            counts[found[0]] = max(counts.get(found[0], 0), found[1] + 1)
    adopted = []
    for name, count in sorted(counts.items()):
        known = listed.get(name)
        if known is None:
            listed[name] = topics_file.TopicInfo(name, uuid.uuid4(), count,
                                                 dict(_ADOPTED_CONFIGS.get(name, {})))
            adopted.append(name)
        elif known.partitions < count:
            listed[name] = replace(known, partitions=count)
            adopted.append(name)
    if adopted:
        log.warning("adopted topics found on disk but missing from %s (a new one gets default "
                    "configs, an internal one compaction): %s", topics_file.FILE_NAME,
                    ", ".join(adopted))
    return list(listed.values())
