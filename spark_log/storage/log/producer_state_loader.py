"""Rebuilding a partition's producer state when its log opens (Kafka's rebuildProducerState),
and with it the transaction indexes of segments that recovery rewrote.

* Clean shutdown: the snapshot taken at close is at the log end, so nothing is replayed. Every
  roll and every clean close writes a snapshot, so a log without one lost it (deleted, or
  damaged and dropped): the whole log is replayed. (Kafka assumes an empty state there, for
  logs older than snapshots; with it, a transaction left open would no longer hold back
  read_committed consumers.)
* Unclean shutdown: snapshots above the recovered log end are deleted; the newest one at or
  below the first recovered segment is loaded, and every batch after it is replayed, headers
  only (control batches are decoded for their marker). Snapshots between the two stay (unlike
  Kafka, whose recovery deletes them): the log still holds the prefix each describes, and
  deleting one per partition was most of a crashed start of many partitions. Aborted
  transactions whose markers lie in recovered segments are written to those segments'
  transaction indexes again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from spark_log.records.batch_header import BatchHeader
from spark_log.records.control_record import EndTransactionMarker, read_end_transaction_marker
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record_batch import decode_batch
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.index.transaction_index import AbortedTxn
from spark_log.storage.log.segment import Segment
from spark_log.storage.producer_state.producer_state import ProducerStateManager

log = logging.getLogger(__name__)


def rebuild_producer_state(manager: ProducerStateManager, segments: Sequence[Segment], *,
                           log_end: int, recovered_from: int | None, now_ms: int,
                           max_idle_ms: int | None) -> int:
    """Load and replay as the module docstring says; returns the number of batches replayed.
    `recovered_from` is the base offset of the first segment recovery walked (None after a
    clean shutdown); those segments' transaction indexes must have been reset."""
    limit = log_end if recovered_from is None else min(recovered_from, log_end)
    start = manager.load_latest_snapshot(limit, log_end, now_ms, max_idle_ms)
    if start < 0:
        start = segments[0].base_offset if segments else log_end
        manager.map_end_offset = start
    index_from = log_end if recovered_from is None else recovered_from
    replayed = 0
    for segment, pos, h in _batches(segments, start, log_end):
        replayed += 1
        if h.producer_id < 0:
            continue
        markers = _marker_of(segment, pos, h)
        append = manager.prepare([h], AppendOrigin.REPLICATION, markers)
        for txn, lso in manager.commit(append, h.next_offset):
            if txn.last_offset >= index_from:
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                    txn.last_offset, lso))
    manager.map_end_offset = max(manager.map_end_offset, log_end)
    if replayed:
        log.debug("%s: rebuilt producer state from offset %d (%d batches replayed)",
                 manager.name, start, replayed)
    return replayed


def _batches(segments: Sequence[Segment], start: int, end: int
             ) -> Iterator[tuple[Segment, int, BatchHeader]]:
    """(segment, position, header) of every batch ending at or after `start` and starting
    before `end`."""
    for i, segment in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
            continue
        if segment.base_offset >= end:
            return
        found = segment.translate_offset(start)
        if found is None:
            continue
        for pos, h in segment.log.batches(found[0]):
            if h.base_offset >= end:
                return
            if h.last_offset >= start:
                yield segment, pos, h


def _marker_of(segment: Segment, pos: int, h: BatchHeader) -> dict[int, EndTransactionMarker]:
    if not h.is_control:
        return {}
    marker = read_marker(segment.log.read(pos, h.size))
    return {} if marker is None else {h.base_offset: marker}


def read_marker(batch: bytes | memoryview) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker of a control batch, None if it holds another control type or
    cannot be read (logged)."""
    try:
        return read_end_transaction_marker(decode_batch(batch))
    except (CorruptRecordError, ValueError) as e:
        log.warning("Unreadable control batch skipped: %s", e)
        return None
