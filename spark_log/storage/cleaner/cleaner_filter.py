"""The cleaner's decision for each batch and record of the log it rewrites (the record half of
Kafka's cleaner RecordFilter, and MemoryRecords.filterTo driving it).

A record is kept when it is past the offset map (mapped later rounds), or when it is the
latest record of its key in the map (or its key is not in the map) and it has a value or is a
tombstone whose delete horizon has not passed. Records without a key are removed.

Tombstones: the first time a batch holding a kept tombstone is rewritten, it gets a delete
horizon of now + delete.retention.ms (KIP-534); once a later round runs past that horizon its
tombstones are removed. So a tombstone stays readable for at least delete.retention.ms after
the round that first cleaned it.

A batch whose records all survive, and that needs no horizon, is copied as it is (no decode of
values, no new CRC); otherwise it is rebuilt from the kept records' bytes. Under the default
policy the batches are walked a step of a chunk at a time (`OffsetMap.filter_batches`: native
when built), which copies and drops batches itself and leaves the rest to `filter_batch`; a
batch it copies or drops is not CRC-checked again if the offset map's walk checked it. Whole
batches are dropped, or kept empty, as the `BatchPolicy` says; the last batch of the cleaning
round is always kept, empty if need be, so the round's end offset stays visible in the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_log.records.batch_header import HEADER, BatchHeader, read_header
from spark_log.records.batch_rewrite import (
    OFFSET,
    RecordSpan,
    empty_batch,
    rebuild_batch,
    scan_record_spans,
)
from spark_log.records.batch_walk import KEEP
from spark_log.records.record_batch import BatchView
from spark_log.storage.cleaner.cleaner_batch_policy import BatchPolicy, BatchRetention, is_default
from spark_log.storage.cleaner.cleaner_offset_map import OffsetMap
from spark_log.storage.filesystem import Buffer


@dataclass
class FilterStats:
    """Counts of one rewrite walk (Kafka's CleanerStats, rewrite half)."""

    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    batches_rebuilt: int = 0
    batches_emptied: int = 0


class RecordFilter:
    """Filters the batches of one cleaning round in offset order.

    Thread-safety: none; owned by the round's worker. Reads the offset map without changing it.
    """

    def __init__(self, offset_map: OffsetMap, policy: BatchPolicy, *, now_ms: int,
                 delete_retention_ms: int, upper_bound_offset: int) -> None:
        self.map = offset_map
        self.policy = policy
        self.now_ms = now_ms
        self.horizon_ms = now_ms + delete_retention_ms
        self.upper_bound = upper_bound_offset
        self.stats = FilterStats()
        self.kept_markers: set[int] = set()  # offsets of the control records written

    def filter_step(self, chunk: memoryview, pos: int, buffers: list[Buffer],
                    headers: list[BatchHeader]) -> int:
        """Filter the batches of `chunk` from `pos` for one step, appending what to write for
        them to `buffers` and `headers`; returns where the step ended."""
        if not is_default(self.policy):
            view = BatchView(chunk, pos)
            _append(self.filter_batch(view), buffers, headers)
            return pos + view.size
        pos, decisions, counts = self.map.filter_batches(chunk, pos, self.now_ms,
                                                         self.upper_bound)
        stats = self.stats
        stats.messages_read += counts[0]
        stats.bytes_read += counts[1]
        stats.messages_retained += counts[2]
        stats.bytes_retained += counts[3]
        for at, decision in decisions:
            if decision == KEEP:  # copied whole: counted above
                header = BatchHeader._make(HEADER.unpack_from(chunk, at))
                buffers.append(chunk[at:at + header.size])
                headers.append(header)
            else:
                _append(self.filter_batch(BatchView(chunk, at)), buffers, headers)
        return pos

    def filter_batch(self, view: BatchView) -> tuple[Buffer, BatchHeader] | None:
        """What to write for the batch: its own bytes, a rebuilt or an empty batch (with its
        header), or None."""
        stats = self.stats
        stats.bytes_read += view.size
        stats.messages_read += view.header.records_count
        kept = self._filter_batch(view)
        if kept is None:
            return None
        header = view.header if isinstance(kept, memoryview) else read_header(kept)
        stats.bytes_retained += header.size
        stats.messages_retained += header.records_count
        return kept, header

    def _filter_batch(self, view: BatchView) -> Buffer | None:
        """The batch's replacement: its own bytes, a rebuilt batch, an empty one, or None."""
        header = view.header
        decision = self.policy.check_batch(header)
        retention = decision.retention
        discard = decision.discard_records or retention is BatchRetention.DELETE
        if header.next_offset == self.upper_bound:
            retention = BatchRetention.RETAIN_EMPTY
        elif retention is BatchRetention.DELETE:
            return None
        view.verify_crc()
        if discard or header.records_count == 0:
            return self._empty_or_none(header, retention)
        section = view.records_buffer()
        count = header.records_count
        if header.is_control:
            kept: list[RecordSpan] | None = scan_record_spans(bytes(section), count,
                                                              header.base_offset)
            tombstones = decision.contains_marker_for_empty_txn
            self.kept_markers.update(span[OFFSET] for span in kept)
        else:
            keep_deletes = not header.has_delete_horizon or self.now_ms < header.base_timestamp
            kept, tombstones = self.map.kept_records(section, count, header.base_offset,
                                                     keep_deletes)
            tombstones = tombstones or decision.contains_marker_for_empty_txn
        if kept is not None and not kept:
            return self._empty_or_none(header, retention)
        needs_horizon = tombstones and not header.has_delete_horizon
        if (kept is None or len(kept) == count) and not needs_horizon:
            return view.raw
        if kept is None:  # every record kept, but under a new delete horizon
            kept = scan_record_spans(bytes(section), count, header.base_offset)
        self.stats.batches_rebuilt += 1
        return rebuild_batch(header, bytes(section), kept,
                             delete_horizon_ms=self.horizon_ms if needs_horizon else None)

    def _empty_or_none(self, header: BatchHeader, retention: BatchRetention) -> bytes | None:
        if retention is not BatchRetention.RETAIN_EMPTY:
            return None
        self.stats.batches_emptied += 1
        return empty_batch(header)


def _append(kept: tuple[Buffer, BatchHeader] | None, buffers: list[Buffer],
            headers: list[BatchHeader]) -> None:
    if kept is not None:
        buffers.append(kept[0])
        headers.append(kept[1])
