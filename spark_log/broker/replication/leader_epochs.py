"""KIP-320's check of the leader epoch a client names in Fetch, ListOffsets and
OffsetForLeaderEpoch against the partition's current leader epoch (from the cluster metadata),
and the error a request for a partition this broker does not lead gets (KIP-951: it carries the
current leader, so the client goes there without a metadata round trip).
"""

from __future__ import annotations

from spark_log.broker.errors import KafkaError
from spark_log.protocol import ErrorCode


class NotLeaderError(KafkaError):
    """NOT_LEADER_OR_FOLLOWER for a partition led elsewhere (or by no one: leader -1)."""

    def __init__(self, topic: str, partition: int, leader_id: int, leader_epoch: int) -> None:
        super().__init__(ErrorCode.not_leader_or_follower,
                         f"This broker is not the leader of {topic}-{partition} "
                         f"(the leader is {leader_id}, epoch {leader_epoch})")
        self.leader_id, self.leader_epoch = leader_id, leader_epoch


def check_leader_epoch(current: int, leader_epoch: int) -> None:
    """KIP-320: a client that knows a newer epoch than ours, or an older one, must refresh."""
    if current < 0 or current == leader_epoch:
        return
    if current < leader_epoch:
        raise KafkaError(ErrorCode.fenced_leader_epoch)
    raise KafkaError(ErrorCode.unknown_leader_epoch)
