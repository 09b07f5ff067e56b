"""The `__consumer_offsets` topic: its name, its configs, and which partition holds a group.

A group lives in partition `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with
Java's `String.hashCode` (31-based over UTF-16 code units, wrapping at 32 bits) and Kafka's
`Utils.abs`, which maps Integer.MIN_VALUE to 0 instead of overflowing. Every record of a group
(its metadata and its offsets) goes to that partition, so loading a partition restores whole
groups.
"""

from __future__ import annotations

from spark_log.broker.broker_config import BrokerConfig

OFFSETS_TOPIC = "__consumer_offsets"
_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: h = 31*h + c over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: |n|, except that Integer.MIN_VALUE gives 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of `group_id`."""
    return kafka_abs(java_string_hash(group_id)) % partitions


def topic_configs(config: BrokerConfig) -> dict[str, str]:
    """The topic configs Kafka creates `__consumer_offsets` with."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.get("offsets.topic.segment.bytes")),
    }
