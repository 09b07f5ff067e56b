"""Changes to the topics of an image (Kafka's TopicsDelta and TopicDelta): TopicRecord,
PartitionRecord, PartitionChangeRecord and RemoveTopicRecord replayed in log order, checked
against the topics they apply to, then applied as a new topics map.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from uuid import UUID

from .errors import ImageError
from .image import TopicImage
from .local_changes import LocalReplicaChanges, local_replica_changes
from .partition_registration import PartitionRegistration
from .records import PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord

__all__ = ["TopicsDelta"]


class _TopicChange:
    """A topic the delta touched: its partitions as they were (`base`, empty for a topic the
    delta created) and those the delta wrote (`written`)."""

    __slots__ = ("base", "id", "name", "written")

    def __init__(self, name: str, topic_id: UUID, base: Mapping[int, PartitionRegistration]):
        self.name = name
        self.id = topic_id
        self.base = base
        self.written: dict[int, PartitionRegistration] = {}

    def partition(self, pid: int) -> PartitionRegistration | None:
        found = self.written.get(pid)
        return self.base.get(pid) if found is None else found

    def image(self) -> TopicImage:
        return TopicImage(self.name, self.id, {**self.base, **self.written})


class TopicsDelta:
    """Topic changes over `before` (topics by id).

    Invariants: a topic is live when the delta created or changed it, or it is in `before`, not
    deleted and the delta is not a snapshot; live topics have distinct names and ids; a topic
    id, once deleted, is not used again. A snapshot delta sees nothing of `before` while
    replaying (its records stand alone) and drops every topic of `before` it did not name.
    Each replay either applies its record whole or raises `ImageError` and changes nothing.
    """

    def __init__(self, before: Mapping[UUID, TopicImage], snapshot: bool = False,
                 before_by_name: Mapping[str, TopicImage] | None = None) -> None:
        self.before = before
        self.snapshot = snapshot
        self._before_names = (before_by_name if before_by_name is not None
                              else {topic.name: topic for topic in before.values()})
        self._changed: dict[UUID, _TopicChange] = {}
        self._names: dict[str, UUID] = {}  # names of the changed topics
        self._deleted: dict[UUID, str] = {}
        self.created_topic_ids: set[UUID] = set()

    # ---- lookups ------------------------------------------------------------------------

    def _visible(self, topic_id: UUID) -> TopicImage | None:
        """The topic as it was before the delta, if the delta still sees it."""
        if self.snapshot or topic_id in self._deleted:
            return None
        return self.before.get(topic_id)

    def topic_id(self, name: str) -> UUID | None:
        """The id of the live topic called `name`."""
        found = self._names.get(name)
        if found is not None:
            return found
        topic = None if self.snapshot else self._before_names.get(name)
        if topic is None or topic.id in self._deleted:
            return None
        return topic.id

    def _live(self, topic_id: UUID) -> _TopicChange | TopicImage | None:
        change = self._changed.get(topic_id)
        return change if change is not None else self._visible(topic_id)

    def _change_for(self, record: PartitionRecord | PartitionChangeRecord) -> _TopicChange:
        change = self._changed.get(record.topic_id)
        if change is not None:
            return change
        topic = self._visible(record.topic_id)
        if topic is None:
            raise ImageError(record, f"no topic with id {record.topic_id}")
        return _TopicChange(topic.name, topic.id, topic.partitions)

    # ---- replay ---------------------------------------------------------------------------

    def replay_topic(self, record: TopicRecord) -> None:
        if self._live(record.topic_id) is not None or record.topic_id in self._deleted:
            raise ImageError(record, f"topic id {record.topic_id} is already in use")
        holder = self.topic_id(record.name)
        if holder is not None:
            raise ImageError(record, f"topic name {record.name!r} is already in use by "
                                     f"topic id {holder}")
        self._changed[record.topic_id] = _TopicChange(record.name, record.topic_id, {})
        self._names[record.name] = record.topic_id
        self.created_topic_ids.add(record.topic_id)

    def replay_topic_image(self, topic: TopicImage) -> None:
        """Replay `topic.to_records()`: its TopicRecord, then its partitions in order, each
        registration taken as it is."""
        self.replay_topic(TopicRecord(name=topic.name, topic_id=topic.id))
        written = self._changed[topic.id].written
        for pid in sorted(topic.partitions):
            written[pid] = topic.partitions[pid]

    def replay_partition(self, record: PartitionRecord) -> None:
        change = self._change_for(record)
        try:
            partition = PartitionRegistration.from_record(record)
        except ValueError as exc:
            raise ImageError(record, str(exc)) from None
        self._keep(change).written[record.partition_id] = partition

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        # (the changed topic found once: a topic id hashes in Python, and every replayed change
        # record comes here)
        change = self._changed.get(record.topic_id)
        kept = change is not None
        if change is None:
            change = self._change_for(record)
        current = change.partition(record.partition_id)
        if current is None:
            raise ImageError(record, f"topic {change.name!r} has no partition "
                                     f"{record.partition_id}")
        try:
            partition = current.merge(record)
        except ValueError as exc:
            raise ImageError(record, str(exc)) from None
        (change if kept else self._keep(change)).written[record.partition_id] = partition

    def replay_remove_topic(self, record: RemoveTopicRecord) -> str:
        """Remove the topic; returns its name (its configs go with it)."""
        live = self._live(record.topic_id)
        if live is None:
            raise ImageError(record, f"no topic with id {record.topic_id}")
        self._changed.pop(record.topic_id, None)
        self._names.pop(live.name, None)
        self.created_topic_ids.discard(record.topic_id)
        if record.topic_id in self.before:
            self._deleted[record.topic_id] = self.before[record.topic_id].name
        return live.name

    def _keep(self, change: _TopicChange) -> _TopicChange:
        if change.id not in self._changed:
            self._changed[change.id] = change
            self._names[change.name] = change.id
        return change

    # ---- results --------------------------------------------------------------------------

    @property
    def deleted_topics(self) -> Mapping[UUID, str]:
        """The topics of `before` this delta removes, by id, with their names."""
        if not self.snapshot:
            return MappingProxyType(dict(self._deleted))
        return MappingProxyType({topic_id: topic.name for topic_id, topic in self.before.items()
                                 if topic_id not in self._changed})

    @property
    def changed_topics(self) -> Mapping[UUID, TopicImage]:
        """The topics this delta created or changed, each with only the partitions it wrote."""
        return MappingProxyType({topic_id: TopicImage(change.name, topic_id, change.written)
                                 for topic_id, change in self._changed.items()})

    def apply(self) -> dict[UUID, TopicImage]:
        """The topics after the delta."""
        topics = {} if self.snapshot else {
            topic_id: topic for topic_id, topic in self.before.items()
            if topic_id not in self._deleted}
        for topic_id, change in self._changed.items():
            topics[topic_id] = change.image()
        return topics

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """What this delta changes for `broker_id` (see `LocalReplicaChanges`)."""
        return local_replica_changes(broker_id, self.before, self.changed_topics.values(),
                                     self.deleted_topics, replaced=self.snapshot)
