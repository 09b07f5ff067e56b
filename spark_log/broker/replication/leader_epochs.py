"""The leader epoch of the partitions this broker leads, and KIP-320's check of the epoch a
client names in Fetch, ListOffsets and OffsetForLeaderEpoch.

On a single broker every partition is led here with leader epoch 0, forever.
"""

from __future__ import annotations

from spark_log.broker.errors import KafkaError
from spark_log.protocol import ErrorCode

LEADER_EPOCH = 0


def check_leader_epoch(current: int) -> None:
    """KIP-320: a client that knows a newer epoch than ours, or an older one, must refresh."""
    if current < 0 or current == LEADER_EPOCH:
        return
    if current < LEADER_EPOCH:
        raise KafkaError(ErrorCode.fenced_leader_epoch)
    raise KafkaError(ErrorCode.unknown_leader_epoch)
