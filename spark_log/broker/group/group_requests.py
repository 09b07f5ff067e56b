"""What the group APIs take and give, independent of wire versions: the JoinGroup and SyncGroup
requests and their error replies, one partition of an offset commit or fetch, a group as
`describe_group` shows it, the group settings from the broker config, and the `GroupStore`
through which the rebalance protocol persists a group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.group.group import ClassicGroup, Protocols
from spark_log.broker.group.offset_store import OffsetAndMetadata, TopicPartition
from spark_log.protocol import ErrorCode


class GroupStore(Protocol):
    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
        """Persist the group with `assignment`; raise KafkaError when that fails."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """One partition of an OffsetCommit or TxnOffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """One partition of an OffsetFetch answer (offset -1 and "" when none is committed)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as `spark-log groups describe` and metrics see it."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str | None
    generation: int
    leader: str | None
    members: tuple[MemberDescription, ...]
    offsets: dict[TopicPartition, OffsetAndMetadata]


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The broker's group.* settings the protocol enforces. Immutable."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupSettings:
        return cls(config.get("group.min.session.timeout.ms"),
                   config.get("group.max.session.timeout.ms"),
                   config.get("group.initial.rebalance.delay.ms"),
                   config.get("group.max.size"))


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup of any version. Timeouts are in ms (v0 has no rebalance timeout: the session
    timeout stands in); `client_host` is shown as Kafka shows it ("/127.0.0.1"). Immutable."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    api_version: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A SyncGroup of any version; `assignments` is the leader's, empty for followers.
    Immutable."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: Mapping[str, bytes]


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": []}


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}
