"""The offset half of the group coordinator: OffsetCommit, OffsetFetch, OffsetDelete, offset
expiry, and the hooks the transaction coordinator uses (TxnOffsetCommit and completing a
transaction), with Kafka's rules for who may commit:

* a group that does not exist accepts commits with generation -1 (a "simple" consumer, or the
  admin client) and becomes a protocol-less group; other commits to it fail with
  ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from OffsetCommit v9);
* otherwise the member must be known and current and the generation must match, and a group
  that is completing a rebalance answers REBALANCE_IN_PROGRESS
  (`ClassicGroup.validate_offset_commit`);
* metadata longer than 4096 characters (Kafka's offset.metadata.max.bytes) fails that partition
  with OFFSET_METADATA_TOO_LARGE.

A commit is answered only after its records are in the log. Group-level failures raise
`KafkaError`; per-partition ones come back as one error code per partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group import ClassicGroup, GroupState
from spark_log.broker.group.group_metadata_records import OffsetCommitKey, OffsetCommitValue
from spark_log.broker.group.group_requests import FetchedOffset, PartitionCommit
from spark_log.broker.group.offset_store import NO_PRODUCER_ID, TopicPartition
from spark_log.protocol import ErrorCode

if TYPE_CHECKING:
    from spark_log.broker.broker_config import BrokerConfig
    from spark_log.broker.group.group_coordinator_state import CoordinatorState
    from spark_log.broker.group.group_membership import GroupMembership
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

OFFSET_METADATA_MAX_CHARS = 4096
GROUP_ID_NOT_FOUND_FROM_VERSION = 9
NO_OFFSET = -1


class OffsetOperations:
    """Mixed into `GroupCoordinator`, whose state, membership and readiness checks it uses."""

    state: CoordinatorState
    membership: GroupMembership
    clock: Clock
    config: BrokerConfig
    _active: bool

    def ensure_ready(self, group_id: str) -> None:
        raise NotImplementedError

    # ---- OffsetCommit -----------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                       generation: int, commits: Sequence[PartitionCommit],
                       retention_ms: int = -1, api_version: int = 0) -> list[ErrorCode]:
        """Commit `commits` for a member (or a simple consumer, generation -1); returns one
        error per commit. `retention_ms` (OffsetCommit v2-4) sets an expire timestamp."""
        self.ensure_ready(group_id)
        group = self._group_for_commit(group_id, generation, api_version)
        if group is not None:
            group.validate_offset_commit(member_id, instance_id, generation, transactional=False)
            self.membership.touch(group, member_id)
        now = self.clock.now_ms()
        expire = now + retention_ms if retention_ms != -1 else -1
        return self._write_commits(group_id, commits, now, expire, NO_PRODUCER_ID, -1)

    def _group_for_commit(self, group_id: str, generation: int, api_version: int
                          ) -> ClassicGroup | None:
        group = self.state.groups.get(group_id)
        if group is None and generation >= 0:
            raise KafkaError(ErrorCode.group_id_not_found
                             if api_version >= GROUP_ID_NOT_FOUND_FROM_VERSION
                             else ErrorCode.illegal_generation)
        return group

    def _write_commits(self, group_id: str, commits: Sequence[PartitionCommit], now: int,
                       expire: int, producer_id: int, producer_epoch: int) -> list[ErrorCode]:
        errors = []
        entries: list[tuple[OffsetCommitKey, OffsetCommitValue | None]] = []
        for c in commits:
            if c.metadata is not None and len(c.metadata) > OFFSET_METADATA_MAX_CHARS:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(ErrorCode.none)
            entries.append((OffsetCommitKey(group_id, c.topic, c.partition),
                            OffsetCommitValue(c.offset, c.metadata or "", now, c.leader_epoch,
                                              expire)))
        self.state.write_offsets(group_id, entries, producer_id, producer_epoch)
        return errors

    # ---- OffsetFetch ------------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                      require_stable: bool = False) -> list[FetchedOffset]:
        """Committed offsets of `partitions`, or of every partition the group has committed
        (None). With `require_stable`, a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT."""
        self.ensure_ready(group_id)
        group = self.state.groups.get(group_id)
        known = group is not None and not group.is_in(GroupState.DEAD)
        if partitions is None:
            if not known:
                return []
            partitions = sorted(self.state.offsets.group_offsets(group_id))
        return [self._fetch_one(group_id, tp, known, require_stable) for tp in partitions]

    def _fetch_one(self, group_id: str, tp: TopicPartition, known: bool,
                   require_stable: bool) -> FetchedOffset:
        topic, partition = tp
        offsets = self.state.offsets
        if known and require_stable and offsets.has_pending(group_id, topic, partition):
            return FetchedOffset(topic, partition, NO_OFFSET, -1, "",
                                 ErrorCode.unstable_offset_commit)
        entry = offsets.get(group_id, topic, partition) if known else None
        if entry is None:
            return FetchedOffset(topic, partition, NO_OFFSET, -1, "")
        return FetchedOffset(topic, partition, entry.offset, entry.leader_epoch, entry.metadata)

    # ---- OffsetDelete -----------------------------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> list[ErrorCode]:
        """Delete committed offsets of topics the group does not subscribe to; one error per
        partition (GROUP_SUBSCRIBED_TO_TOPIC for the others)."""
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        self.ensure_ready(group_id)
        group = self.state.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise KafkaError(ErrorCode.group_id_not_found)
        if not group.is_empty() and not group.uses_consumer_protocol():
            raise KafkaError(ErrorCode.non_empty_group)
        offsets = self.state.offsets
        errors = []
        tombstones: list[tuple[OffsetCommitKey, OffsetCommitValue | None]] = []
        for topic, partition in partitions:
            if group.is_subscribed_to(topic):
                errors.append(ErrorCode.group_subscribed_to_topic)
                continue
            errors.append(ErrorCode.none)
            if offsets.get(group_id, topic, partition) is not None or \
                    offsets.has_pending(group_id, topic, partition):
                tombstones.append((OffsetCommitKey(group_id, topic, partition), None))
        self.state.write_offsets(group_id, tombstones)
        return errors

    # ---- expiry -----------------------------------------------------------------------------
    def expire_offsets(self) -> None:
        """Tombstone expired offsets, and groups left empty without any. The broker runs this
        every offsets.retention.check.interval.ms."""
        if not self._active:
            return
        retention_ms = self.config.get("offsets.retention.minutes") * 60_000
        now = self.clock.now_ms()
        written = 0
        for group in list(self.state.groups.values()):
            if self.state.partition_of(group.group_id) in self.state.loading:
                continue
            expired, everything = self.state.offsets.expired(group, now, retention_ms)
            try:
                if everything and group.is_empty():
                    self.state.delete_group(group)
                    written += len(expired) + 1
                    log.info("Group %s expired with its %d offsets", group.group_id,
                             len(expired))
                elif expired:
                    self.state.write_offsets(group.group_id, [
                        (OffsetCommitKey(group.group_id, t, p), None) for t, p in expired])
                    written += len(expired)
            except KafkaError as e:
                log.warning("Cannot expire offsets of group %s: %s", group.group_id,
                            e.code.name)
        if written:
            log.info("Removed %d expired offset and group records", written)

    def on_topics_deleted(self, topics: Iterable[str]) -> None:
        """Tombstone every offset (committed or pending) of deleted topics, as Kafka does when
        partitions are deleted. To be called by DeleteTopics."""
        if not self._active:
            return
        for group_id, partitions in self.state.offsets.partitions_of_topics(set(topics)).items():
            try:
                self.state.write_offsets(group_id, [
                    (OffsetCommitKey(group_id, t, p), None) for t, p in sorted(partitions)])
            except KafkaError as e:
                log.warning("Cannot delete the offsets of deleted topics for group %s: %s",
                            group_id, e.code.name)

    # ---- transactions -----------------------------------------------------------------------
    def commit_transactional_offsets(self, group_id: str, producer_id: int,
                                     producer_epoch: int, commits: Sequence[PartitionCommit],
                                     generation: int = -1, member_id: str = "",
                                     instance_id: str | None = None) -> list[ErrorCode]:
        """TxnOffsetCommit: write `commits` in `producer_id`'s transaction. They stay pending
        (invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT with require_stable) until
        `complete_transaction`. Returns one error per commit; raises KafkaError for the group."""
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id)
        self.ensure_ready(group_id)
        group = self.state.groups.get(group_id)
        if group is None and generation >= 0:
            raise KafkaError(ErrorCode.illegal_generation)
        if group is not None:
            group.validate_offset_commit(member_id, instance_id, generation, transactional=True)
        return self._write_commits(group_id, commits, self.clock.now_ms(), -1, producer_id,
                                   producer_epoch)

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             partitions: Iterable[int] | None = None,
                             coordinator_epoch: int = 0) -> None:
        """Write the COMMIT (or ABORT) marker of `producer_id` to `partitions` of
        __consumer_offsets — by default every partition where it has pending offsets — and
        make its pending offsets committed (or drop them). Raises KafkaError if a marker cannot
        be written; markers already written stay."""
        if partitions is None:
            partitions = {self.state.partition_of(g)
                          for g in self.state.offsets.pending_groups(producer_id)}
        for partition in sorted(set(partitions)):
            self.state.write_end_marker(partition, producer_id, producer_epoch, commit,
                                        coordinator_epoch)

    def has_pending_transaction(self, producer_id: int) -> bool:
        return bool(self.state.offsets.pending_groups(producer_id))
