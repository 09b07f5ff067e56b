"""The name of a partition's directory, `<topic>-<partition>`, and of one being deleted,
`<topic>-<partition>.<uuid hex>-delete` (a crash midway leaves it for the next start to finish).
"""

from __future__ import annotations

import re
import uuid

TopicPartition = tuple[str, int]

DELETE_DIR_SUFFIX = "-delete"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid hex>-delete`, the topic cut so the name fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: 255 - len(suffix)] + suffix


def parse_partition_dir(name: str) -> TopicPartition | None:
    """('my-topic.v2', 3) for 'my-topic.v2-3': topics may hold '-' and '.', so split on the
    last '-'. None if the name is not a partition directory."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not partition.isdigit() or not is_legal_topic(topic):
        return None
    return topic, int(partition)


def is_legal_topic(topic: str) -> bool:
    return bool(_LEGAL_TOPIC.fullmatch(topic)) and topic not in (".", "..")
