"""Which compacted log to clean next, and how far each has been cleaned (Kafka's
LogCleanerManager).

`cleaner-offset-checkpoint` in the data directory (Kafka's checkpoint file format, written
atomically) holds, per compacted partition, the first dirty offset: everything below it has
been cleaned. Each pass picks, among compacted logs not being cleaned and not marked
uncleanable, the one with the highest dirty ratio that is over its min.cleanable.dirty.ratio
(or overdue by max.compaction.lag.ms); see `log_to_clean`.

A checkpoint entry belongs to one incarnation of a partition: entries of deleted partitions
are dropped, and a partition deleted and created again starts from its log start offset.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from spark_log.storage.checkpoint import (
    CorruptCheckpointError,
    OffsetCheckpointFile,
    TopicPartition,
)
from spark_log.storage.cleaner.log_to_clean import LogToClean, cleanable_offsets, log_to_clean
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

LastStableOffset = Callable[[PartitionLog], int]


def own_last_stable_offset(partition_log: PartitionLog) -> int:
    """The log's own last stable offset (at most its high watermark)."""
    return partition_log.last_stable_offset


class LogCleanerManager:
    """Cleaning state of the logs of one data directory.

    Invariants: a partition is in `in_progress` while a round cleans it, and then no other
    round starts on it; the checkpoint file lists only partitions whose log exists.
    Thread-safety: none. Called on the thread that owns the logs (the broker's event loop).
    """

    def __init__(self, logs: LogManager, fs: FileSystem,
                 last_stable_offset: LastStableOffset = own_last_stable_offset) -> None:
        self.logs = logs
        self.last_stable_offset = last_stable_offset
        self._file = OffsetCheckpointFile(
            os.path.join(logs.data_dir, CLEANER_OFFSET_CHECKPOINT), fs)
        try:
            self._checkpoints = self._file.read()
        except CorruptCheckpointError as e:
            log.warning("Ignoring unreadable cleaner checkpoint (%s); logs are cleaned from "
                        "their start", e)
            self._checkpoints = {}
        self._owners: dict[TopicPartition, PartitionLog] = {}
        self.in_progress: set[TopicPartition] = set()
        self._uncleanable: dict[TopicPartition, PartitionLog] = {}
        self.dirtiest_ratio = 0.0

    def checkpoint(self, tp: TopicPartition) -> int | None:
        """The first dirty offset recorded for `tp`, if any."""
        self._forget_gone()
        return self._checkpoints.get(tp)

    def grab_filthiest(self, now_ms: int) -> LogToClean | None:
        """The log to clean now, marked in progress; None if no log needs cleaning."""
        self._forget_gone()
        candidates = []
        for partition_log in self.logs.logs():
            tp = (partition_log.topic, partition_log.partition)
            if not partition_log.config.compact or partition_log.failed or \
                    tp in self.in_progress or self.is_uncleanable(partition_log):
                continue
            offsets = cleanable_offsets(partition_log, self._checkpoints.get(tp), now_ms,
                                        self.last_stable_offset(partition_log))
            if offsets.force_update_checkpoint:
                self.update_checkpoint(partition_log, offsets.first_dirty_offset)
            candidate = log_to_clean(partition_log, offsets, now_ms)
            if candidate.total_bytes > 0:
                candidates.append(candidate)
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [c for c in candidates if c.should_clean]
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress.add(filthiest.tp)
        return filthiest

    def done_cleaning(self, partition_log: PartitionLog, end_offset: int | None) -> None:
        """A round on the log ended: cleaned below `end_offset`, or aborted (None)."""
        self.in_progress.discard((partition_log.topic, partition_log.partition))
        if end_offset is not None:
            self.update_checkpoint(partition_log, end_offset)

    def mark_uncleanable(self, partition_log: PartitionLog) -> None:
        """Skip the log from now on (it holds data the cleaner cannot read); a partition
        created again under the same name is cleaned again."""
        self._uncleanable[(partition_log.topic, partition_log.partition)] = partition_log

    def is_uncleanable(self, partition_log: PartitionLog) -> bool:
        tp = (partition_log.topic, partition_log.partition)
        return self._uncleanable.get(tp) is partition_log

    def update_checkpoint(self, partition_log: PartitionLog, offset: int) -> None:
        """Record that the log is cleaned below `offset` (ignored if the log was deleted)."""
        tp = (partition_log.topic, partition_log.partition)
        self._forget_gone()
        if self.logs.get(*tp) is not partition_log:
            return
        self._owners[tp] = partition_log
        self._checkpoints[tp] = offset
        self._file.write(self._checkpoints)

    def _forget_gone(self) -> None:
        """Drop entries of partitions deleted (or deleted and created again) since last seen."""
        for tp in list(self._checkpoints):
            current = self.logs.get(*tp)
            owner = self._owners.setdefault(tp, current) if current is not None else None
            if current is None or owner is not current:
                del self._checkpoints[tp]
                self._owners.pop(tp, None)
        for tp, current in list(self._owners.items()):
            if self.logs.get(*tp) is not current:
                del self._owners[tp]
        for tp, current in list(self._uncleanable.items()):
            if self.logs.get(*tp) is not current:
                del self._uncleanable[tp]
