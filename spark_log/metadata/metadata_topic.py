"""The quorum's log as Kafka names it: partition 0 of `__cluster_metadata`, whose topic ID is
Kafka's `Uuid.METADATA_TOPIC_ID` (AAAAAAAAAAAAAAAAAAAAAQ)."""

from __future__ import annotations

import uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)
METADATA_LOG_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"  # its directory in a log dir
