"""Committed offsets in memory, and the pending offsets of open transactions (Kafka's
OffsetMetadataManager state).

The store changes only by replaying `__consumer_offsets` records — the ones just appended, or
the ones read back when a partition loads — so memory and log can never disagree:

* an offset commit record outside a transaction sets the committed offset of its partition;
* one written by a transactional producer goes to that producer's pending offsets and opens a
  transaction on the group; the COMMIT marker later moves the pending offsets into the committed
  ones (unless a newer non-transactional commit is already there), ABORT drops them;
* a tombstone deletes the committed offset and any pending one of that partition.

Expiry (`expired`) implements Kafka's retention rules: offsets of an empty group expire
`offsets.retention.minutes` after the group became empty, those of a simple (protocol-less)
group that long after their commit, those of a Stable consumer group when their topic is no
longer subscribed; a commit that carried its own expire timestamp expires at it; nothing with a
pending transactional offset expires.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from spark_log.broker.group.group import ClassicGroup, GroupState
from spark_log.broker.group.group_metadata_records import OffsetCommitKey, OffsetCommitValue

NO_PRODUCER_ID = -1
TopicPartition = tuple[str, int]
_Offsets = dict[str, dict[TopicPartition, "OffsetAndMetadata"]]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset. `record_offset` is where its record sits in __consumer_offsets."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    record_offset: int

    @classmethod
    def from_record(cls, record_offset: int, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   value.expire_timestamp, record_offset)


class OffsetStore:
    """Invariants: `_open[g]` is exactly the set of producer ids p with `_pending[p][g]` (which
    a tombstone may have emptied); committed offsets keep no empty group entry. Event-loop
    only."""

    def __init__(self) -> None:
        self._committed: _Offsets = {}
        self._pending: dict[int, _Offsets] = {}
        self._open: dict[str, set[int]] = defaultdict(set)

    # ---- replay -----------------------------------------------------------------------------
    def replay(self, record_offset: int, producer_id: int, key: OffsetCommitKey,
               value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            _remove(self._committed, key.group, tp)
            for pid in self._open.get(key.group, ()):
                # the group's (maybe now empty) entry stays until the marker closes it
                self._pending[pid][key.group].pop(tp, None)
            return
        entry = OffsetAndMetadata.from_record(record_offset, value)
        if producer_id == NO_PRODUCER_ID:
            self._committed.setdefault(key.group, {})[tp] = entry
        else:
            self._pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = entry
            self._open[key.group].add(producer_id)

    def replay_end_marker(self, producer_id: int, commit: bool,
                          owns: Callable[[str], bool] = lambda group: True) -> None:
        """A COMMIT/ABORT marker of `producer_id`, for the groups `owns` selects (the groups of
        the partition that holds the marker)."""
        pending = self._pending.get(producer_id)
        if pending is None:
            return
        for group_id in [g for g in pending if owns(g)]:
            offsets = pending.pop(group_id)
            self._open[group_id].discard(producer_id)
            if not self._open[group_id]:
                del self._open[group_id]
            if commit:
                self._materialize(group_id, offsets)
        if not pending:
            del self._pending[producer_id]

    def _materialize(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]
                     ) -> None:
        committed = self._committed.setdefault(group_id, {})
        for tp, entry in offsets.items():
            existing = committed.get(tp)
            if existing is None or entry.record_offset > existing.record_offset:
                committed[tp] = entry

    def forget(self, owns: Callable[[str], bool]) -> None:
        """Drop every offset, committed or pending, of the groups `owns` selects (the groups of
        a partition this broker no longer leads: its new leader loads them)."""
        for group_id in [g for g in self._committed if owns(g)]:
            del self._committed[group_id]
        for producer_id in list(self._pending):
            pending = self._pending[producer_id]
            for group_id in [g for g in pending if owns(g)]:
                del pending[group_id]
            if not pending:
                del self._pending[producer_id]
        for group_id in [g for g in self._open if owns(g)]:
            del self._open[group_id]

    # ---- queries ----------------------------------------------------------------------------
    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._committed.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._committed.get(group_id, {}))

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in self._pending[pid].get(group_id, {})
                   for pid in self._open.get(group_id, ()))

    def has_open_transactions(self, group_id: str) -> bool:
        return bool(self._open.get(group_id))

    def pending_groups(self, producer_id: int) -> list[str]:
        """Groups with offsets pending in `producer_id`'s open transaction."""
        return list(self._pending.get(producer_id, {}))

    def partitions_to_delete(self, group_id: str) -> Iterator[TopicPartition]:
        """Every partition a DeleteGroups must tombstone: committed or pending."""
        committed = self._committed.get(group_id, {})
        yield from committed
        seen = set(committed)
        for pid in self._open.get(group_id, ()):
            for tp in self._pending[pid].get(group_id, {}):
                if tp not in seen:
                    seen.add(tp)
                    yield tp

    def partitions_of_topics(self, topics: set[str]) -> dict[str, set[TopicPartition]]:
        """Per group, its committed or pending partitions of `topics` (deleted topics)."""
        found: dict[str, set[TopicPartition]] = defaultdict(set)
        for offsets in (self._committed, *self._pending.values()):
            for group_id, partitions in offsets.items():
                found[group_id].update(tp for tp in partitions if tp[0] in topics)
        return {g: tps for g, tps in found.items() if tps}

    # ---- expiry -----------------------------------------------------------------------------
    def expired(self, group: ClassicGroup, now_ms: int, retention_ms: int
                ) -> tuple[list[TopicPartition], bool]:
        """(partitions whose offsets have expired, whether every offset of the group has)."""
        offsets = self._committed.get(group.group_id)
        if not offsets:
            return [], True
        base = expiration_base(group)
        if base is None:
            return [], False
        expired = []
        for (topic, partition), entry in offsets.items():
            if group.is_subscribed_to(topic):
                continue
            if _is_expired(entry, base(entry), now_ms, retention_ms) and \
                    not self.has_pending(group.group_id, topic, partition):
                expired.append((topic, partition))
        everything = len(expired) == len(offsets)
        return expired, everything and not self.has_open_transactions(group.group_id)


def expiration_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
    """When a group's offsets start to age, or None while they must be kept."""
    if not group.protocol_type:  # a simple consumer: from each commit
        return lambda entry: entry.commit_timestamp
    if group.is_empty():
        since = group.state_timestamp
        return lambda entry: entry.commit_timestamp if since is None else since
    if group.uses_consumer_protocol() and group.subscribed_topics is not None and \
            group.state == GroupState.STABLE:
        return lambda entry: entry.commit_timestamp
    return None


def _is_expired(entry: OffsetAndMetadata, base: int, now_ms: int, retention_ms: int) -> bool:
    if entry.expire_timestamp >= 0:
        return now_ms >= entry.expire_timestamp
    return now_ms - base >= retention_ms


def _remove(offsets: _Offsets, group_id: str, tp: TopicPartition) -> None:
    group = offsets.get(group_id)
    if group is not None:
        group.pop(tp, None)
        if not group:
            del offsets[group_id]
