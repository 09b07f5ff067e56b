"""The coordinator's memory — groups and offsets — kept as a replay of `__consumer_offsets`.

Every change is first appended to the group's partition (one batch, origin COORDINATOR) and
only then applied to memory by replaying the very records that were written; a failed append
changes nothing in memory and raises `KafkaError` with the code Kafka answers for it. Loading a
partition at start replays what is in it, so after a restart (or a SIGKILL) memory is rebuilt
from the same records; a damaged batch or record is skipped, logged at ERROR, and the rest of
the partition loads (see `coordinator_loader`). Group metadata is the exception that proves
the rule: the rebalance state machine updates groups in memory and persists them with
`store_group`, whose record is not replayed while the broker runs (it describes the group as it
already is).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from spark_log.broker.coordinator.collaborators import TopicCreation
from spark_log.broker.coordinator.coordinator_loader import read_for_load
from spark_log.broker.errors import KafkaError, error_code_for
from spark_log.broker.group.group import ClassicGroup, GroupMember, GroupState
from spark_log.broker.group.group_metadata_records import (
    KAFKA_RECORD_TYPES,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from spark_log.broker.group.offset_store import OffsetStore
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC, partition_for, topic_configs
from spark_log.protocol import ErrorCode
from spark_log.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    ControlRecordType,
    CorruptRecordError,
    DecodedBatch,
    EndTransactionMarker,
    Record,
    build_batch,
    build_end_transaction_batch,
    read_end_transaction_marker,
)
from spark_log.storage.append_info import AppendOrigin

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.coordinator.collaborators import InternalTopics, PartitionLogs
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

_GROUP_METADATA_VALUE = "GroupMetadataValue"
RecordPair = tuple[bytes, bytes | None]

# Append errors as a coordinator reports them (Kafka's appendGroupMetadataErrorToResponseError).
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


class CoordinatorState:
    """Groups by id and the offset store, plus the partitions loading and loaded.

    Invariants: a group is in `groups` only if its partition has loaded (or is loading);
    memory reflects every record appended or loaded, in log order. Event-loop only."""

    def __init__(self, config: BrokerConfig, clock: Clock, topics: InternalTopics,
                 logs: PartitionLogs) -> None:
        self.config = config
        self.clock = clock
        self.topics = topics
        self.logs = logs
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.loading: set[int] = set()  # partitions being loaded
        self.loaded: set[int] = set()  # partitions whose groups are in memory
        self.creation = TopicCreation(topics, OFFSETS_TOPIC, lambda: self.partitions,
                                      lambda: topic_configs(self.config))

    @property
    def partitions(self) -> int:
        """The topic's partition count once it exists, else offsets.topic.num.partitions."""
        existing = self.topics.partition_count(OFFSETS_TOPIC)
        return existing if existing is not None else \
            self.config.get("offsets.topic.num.partitions")

    # ---- the topic --------------------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.creation.exists()

    def ensure_topic(self) -> None:
        """`__consumer_offsets` is created on first use (FindCoordinator awaits it,
        `create_topic`); until it exists, anything else is COORDINATOR_NOT_AVAILABLE."""
        if not self.topic_exists():
            self.creation.request()
            raise KafkaError(ErrorCode.coordinator_not_available,
                             f"{OFFSETS_TOPIC} is being created")

    async def create_topic(self) -> None:
        await self.creation.create()

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    # ---- writing ----------------------------------------------------------------------------
    def append(self, partition: int, records: Sequence[RecordPair],
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
               ) -> int:
        """Append `records` as one batch; returns the offset of the first."""
        now = self.clock.now_ms()
        transactional = producer_id != NO_PRODUCER_ID
        batch = build_batch(
            [Record(i, now, key, value) for i, (key, value) in enumerate(records)],
            producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=0 if transactional else NO_SEQUENCE, is_transactional=transactional)
        return self._append_batch(partition, batch)

    def _append_batch(self, partition: int, batch: bytes) -> int:
        try:
            self.ensure_topic()
            info = self.logs.append(OFFSETS_TOPIC, partition, batch,
                                    origin=AppendOrigin.COORDINATOR)
        except Exception as e:
            code = error_code_for(e)
            log.error("Cannot append to %s-%d: %s", OFFSETS_TOPIC, partition, e)
            raise KafkaError(_APPEND_ERRORS.get(code, code)) from e
        return info.first_offset

    def write_offsets(self, group_id: str,
                      entries: Sequence[tuple[OffsetCommitKey, OffsetCommitValue | None]],
                      producer_id: int = NO_PRODUCER_ID,
                      producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        """Append offset commits (or tombstones, value None) of one group, then apply them."""
        if not entries:
            return
        pairs = [(encode_key(k), None if v is None else encode_offset_commit_value(v))
                 for k, v in entries]
        first = self.append(self.partition_of(group_id), pairs, producer_id, producer_epoch)
        for i, (key, value) in enumerate(entries):
            self._apply_offset(first + i, producer_id, key, value)

    def write_end_marker(self, partition: int, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int = 0) -> None:
        """Append a COMMIT/ABORT marker of `producer_id` to `partition`, then apply it."""
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch)
        batch = build_end_transaction_batch(marker, producer_id=producer_id,
                                            producer_epoch=producer_epoch,
                                            timestamp=self.clock.now_ms())
        self._append_batch(partition, batch)
        self._apply_end_marker(partition, producer_id, commit)

    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
        """`GroupStore`: persist the group's metadata with the members' `assignment`."""
        value = group_metadata_value(group, assignment)
        pair = (encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value))
        self.append(self.partition_of(group.group_id), [pair])

    def delete_group(self, group: ClassicGroup) -> None:
        """Tombstone the group's offsets and metadata, then forget the group."""
        gid = group.group_id
        tombstones: list[RecordPair] = [
            (encode_key(OffsetCommitKey(gid, topic, partition)), None)
            for topic, partition in self.offsets.partitions_to_delete(gid)]
        tombstones.append((encode_key(GroupMetadataKey(gid)), None))
        first = self.append(self.partition_of(gid), tombstones)
        for i, (key, _) in enumerate(tombstones):
            self._apply(f"{OFFSETS_TOPIC}-{self.partition_of(gid)}", first + i, NO_PRODUCER_ID,
                        key, None)

    # ---- replaying --------------------------------------------------------------------------
    def _apply(self, name: str, offset: int, producer_id: int, key_bytes: bytes | None,
               value_bytes: bytes | None) -> None:
        """Replay the record at `offset` of partition `name`; CorruptRecordError (memory
        unchanged) if it does not parse."""
        if key_bytes is None:
            raise CorruptRecordError("a record without a key")
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            value = None if value_bytes is None else decode_offset_commit_value(value_bytes)
            self._apply_offset(offset, producer_id, key, value)
        elif isinstance(key, GroupMetadataKey):
            group = None if value_bytes is None else \
                group_from_value(key.group, decode_group_metadata_value(value_bytes))
            self._replace_group(key.group, group)
        elif key.version in KAFKA_RECORD_TYPES:
            log.debug("%s: record type %d at offset %d is not used here", name, key.version,
                      offset)
        else:  # as Kafka: a newer broker's record, maybe left by an aborted upgrade
            log.warning("%s: unknown record type %d at offset %d ignored; it could be a left "
                        "over from an aborted upgrade", name, key.version, offset)

    def _apply_offset(self, offset: int, producer_id: int, key: OffsetCommitKey,
                      value: OffsetCommitValue | None) -> None:
        if value is not None and key.group not in self.groups:
            # a simple consumer's group: no protocol, no members
            self.groups[key.group] = ClassicGroup(key.group, state_timestamp=self.clock.now_ms())
        self.offsets.replay(offset, producer_id, key, value)

    def _replace_group(self, group_id: str, group: ClassicGroup | None) -> None:
        previous = self.groups.pop(group_id, None)
        if previous is not None and not previous.is_in(GroupState.DEAD):
            previous.transition_to(GroupState.DEAD, self.clock.now_ms())
        if group is not None:
            self.groups[group_id] = group

    def _apply_end_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.offsets.replay_end_marker(producer_id, commit,
                                       lambda group_id: self.partition_of(group_id) == partition)

    # ---- loading ----------------------------------------------------------------------------
    async def load(self, partition: int) -> None:
        """Replay one partition from its log start to its end; a batch or record that cannot
        be read is skipped (logged), the rest loads."""
        partition_log = self.logs.log(OFFSETS_TOPIC, partition)
        name = f"{OFFSETS_TOPIC}-{partition}"
        async for batch, start in read_for_load(partition_log, name):
            self._load_batch(partition, batch, start)

    def _load_batch(self, partition: int, batch: DecodedBatch, start: int) -> None:
        header = batch.header
        if header.is_control:
            self._load_marker(partition, batch)
            return
        name = f"{OFFSETS_TOPIC}-{partition}"
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for record in batch.records:
            if record.offset < start:
                continue
            try:
                self._apply(name, record.offset, producer_id, record.key, record.value)
            except CorruptRecordError as e:
                log.error("%s: record at offset %d (batch %d..%d) cannot be read and is "
                          "skipped: %s", name, record.offset, header.base_offset,
                          header.last_offset, e)

    def _load_marker(self, partition: int, batch: DecodedBatch) -> None:
        header = batch.header
        try:
            marker = read_end_transaction_marker(batch)
        except CorruptRecordError as e:
            log.error("%s-%d: control batch at offset %d of producer id %d cannot be read and "
                      "is skipped: %s", OFFSETS_TOPIC, partition, header.base_offset,
                      header.producer_id, e)
            return
        if marker is not None:
            self._apply_end_marker(partition, header.producer_id,
                                   marker.type == ControlRecordType.COMMIT)


def group_metadata_value(group: ClassicGroup, assignment: Mapping[str, bytes]
                         ) -> GroupMetadataValue:
    members = tuple(
        MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                       m.rebalance_timeout_ms, m.session_timeout_ms,
                       m.metadata(group.protocol_name), assignment.get(m.member_id, b""))
        for m in group.members.values()) if group.protocol_name is not None else ()
    state_ts = group.state_timestamp if group.state_timestamp is not None else -1
    return GroupMetadataValue(group.protocol_type or "", group.generation, group.protocol_name,
                              group.leader_id if members else None, state_ts, members)


def group_from_value(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    """A group as its latest metadata record left it: Stable with its members, or Empty.
    CorruptRecordError if the value names a member or static instance twice."""
    _check_members(group_id, value.members)
    group = ClassicGroup(
        group_id, state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation=value.generation, protocol_type=value.protocol_type or None,
        protocol_name=value.protocol, leader_id=value.leader,
        state_timestamp=None if value.current_state_timestamp < 0
        else value.current_state_timestamp)
    for m in value.members:
        rebalance_timeout = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
        protocols = ((value.protocol or "", m.subscription),)
        group.add(GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              rebalance_timeout, m.session_timeout, value.protocol_type,
                              protocols, m.assignment))
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def _check_members(group_id: str, members: Sequence[MemberMetadata]) -> None:
    """No coordinator writes a member id or group instance id twice in one group."""
    for what, ids in (("member", [m.member_id for m in members]),
                      ("group instance", [m.group_instance_id for m in members
                                          if m.group_instance_id is not None])):
        if len(set(ids)) != len(ids):
            twice = next(i for i in ids if ids.count(i) > 1)
            raise CorruptRecordError(f"{_GROUP_METADATA_VALUE} of group {group_id}: {what} id "
                                     f"{twice!r} appears twice")
