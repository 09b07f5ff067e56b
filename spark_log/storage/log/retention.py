"""Which old segments a log may delete (Kafka's deleteOldSegments rules).

Three rules, applied in Kafka's order: segments wholly below the log start offset (always),
then, for cleanup.policy=delete, the oldest segments while the log exceeds retention.bytes,
then segments whose largest timestamp is older than retention.ms. Deletion walks from the
oldest segment and stops at the first that does not qualify, never passes the high watermark,
and never picks an empty last segment. Pure functions over the segment list; the log deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spark_log.storage.log.segment import Segment

Predicate = Callable[[Segment, Segment | None], bool]


def deletable_segments(segments: Sequence[Segment], predicate: Predicate, *,
                       high_watermark: Callable[[], int], log_end_offset: Callable[[], int]
                       ) -> list[Segment]:
    """The oldest segments, in order, for which `predicate(segment, next)` holds. The offsets
    are asked for only once a segment qualifies (reading them may open an index)."""
    out: list[Segment] = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        if (nxt is None and segment.size == 0) or not predicate(segment, nxt):
            break
        upper = nxt.base_offset if nxt is not None else log_end_offset()
        if high_watermark() < upper:
            break
        out.append(segment)
    return out


def below_log_start(log_start_offset: int) -> Predicate:
    """Segments whose every offset is below the log start offset."""
    return lambda segment, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def over_retention_bytes(log_size: int, retention_bytes: int) -> Predicate | None:
    """Oldest segments whose removal keeps the log at or above retention.bytes (None: no-op)."""
    if retention_bytes < 0 or log_size < retention_bytes:
        return None
    excess = log_size - retention_bytes

    def predicate(segment: Segment, nxt: Segment | None) -> bool:
        nonlocal excess
        if excess - segment.size < 0:
            return False
        excess -= segment.size
        return True

    return predicate


def past_retention_ms(now_ms: int, retention_ms: int) -> Predicate | None:
    """Segments whose largest timestamp is more than retention.ms old (None: no-op)."""
    if retention_ms < 0:
        return None
    return lambda segment, nxt: now_ms - segment.largest_timestamp() > retention_ms
