"""Which part of a compacted log may be cleaned now, and how dirty it is (Kafka's LogToClean
and the offset rules of LogCleanerManager).

A log splits into a clean section, already compacted, ending at the first dirty offset (the
cleaner checkpoint), and a dirty section after it. The cleanable part of the dirty section
stops before the first uncleanable offset, the smallest of:

* the base offset of the active segment (never cleaned);
* the last stable offset (the high watermark until transactions exist): nothing that a
  consumer may not yet read, nor anything of an open transaction, is compacted;
* with min.compaction.lag.ms, the first dirty segment holding a record younger than the lag;

then rounded down to the start of the segment holding it, since cleaning rewrites whole
segments. The dirty ratio is cleanable bytes / (clean bytes + cleanable bytes); a log is
cleaned when its ratio exceeds min.cleanable.dirty.ratio, or when max.compaction.lag.ms says a
dirty record has waited too long. Pure functions of a log's segments, called on the thread
that owns the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from spark_log.storage.log.log_config import LONG_MAX
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.segment import Segment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_offset: int
    force_update_checkpoint: bool  # the checkpoint was invalid and is reset to the dirty offset


@dataclass
class LogToClean:
    """A candidate for cleaning; `first_uncleanable_offset` is segment-aligned."""

    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    tp: tuple[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.tp = (self.log.topic, self.log.partition)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def should_clean(self) -> bool:
        if self.need_compaction_now and self.cleanable_bytes > 0:
            return True
        return self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def log_to_clean(partition_log: PartitionLog, offsets: OffsetsToClean, now_ms: int
                 ) -> LogToClean:
    segments = partition_log.segments
    first_dirty = offsets.first_dirty_offset
    uncleanable = _segment_base_holding(segments, offsets.first_uncleanable_offset)
    clean = sum(s.size for s in overlapping(segments, -1, first_dirty))
    cleanable = sum(s.size for s in overlapping(segments, min(first_dirty, uncleanable),
                                                  uncleanable))
    delay = max_compaction_delay(partition_log, segments, first_dirty, now_ms)
    return LogToClean(partition_log, first_dirty, uncleanable, clean, cleanable, delay > 0)


def cleanable_offsets(partition_log: PartitionLog, checkpoint: int | None, now_ms: int,
                      last_stable_offset: int) -> OffsetsToClean:
    """The first dirty offset (the checkpoint, reset to the log start offset when it lies
    outside the log) and the first uncleanable offset (not yet segment-aligned)."""
    start, end = partition_log.log_start_offset, partition_log.log_end_offset
    first_dirty = start if checkpoint is None else checkpoint
    force = False
    if first_dirty < start or first_dirty > end:
        if checkpoint is not None and not (partition_log.config.delete and first_dirty < start):
            log.warning("%s: resetting the first dirty offset from %d to the log start offset "
                        "%d: the checkpoint lies outside the log [%d, %d)", partition_log.name,
                        first_dirty, start, start, end)
        first_dirty, force = start, True
    segments = partition_log.segments
    candidates = [last_stable_offset, segments[-1].base_offset]
    lag = max(partition_log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        young = next((s.base_offset for s in non_active_from(segments, first_dirty)
                      if s.largest_timestamp() > now_ms - lag), None)
        if young is not None:
            candidates.append(young)
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def max_compaction_delay(partition_log: PartitionLog, segments: list[Segment],
                         first_dirty: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0: not overdue)."""
    lag = max(partition_log.config.max_compaction_lag_ms, 0)
    if lag == LONG_MAX or lag > now_ms:
        return 0
    stamps = [ts for s in non_active_from(segments, first_dirty)
              if (ts := s.first_batch_timestamp()) is not None and ts > 0]
    clean_until = now_ms - lag
    earliest = min(stamps, default=LONG_MAX)
    return clean_until - earliest if earliest < clean_until else 0


def overlapping(segments: list[Segment], start: int, end: int) -> list[Segment]:
    """Segments that may hold offsets in [start, end): from the one holding `start` on, those
    based below `end` (Kafka's logSegments(from, to))."""
    out = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if nxt is None or nxt > start:
            out.append(segment)
    return out


def non_active_from(segments: list[Segment], offset: int) -> list[Segment]:
    """The non-active segments from the one holding `offset` on."""
    active = segments[-1].base_offset
    return [] if offset > active else overlapping(segments, offset, active)


def _segment_base_holding(segments: list[Segment], offset: int) -> int:
    """Base offset of the segment holding `offset` (the active one's if it is past it)."""
    base = segments[0].base_offset
    for segment in segments:
        if segment.base_offset > offset:
            break
        base = segment.base_offset
    return base
