"""The fast read path of a task: raw Fetch requests to the partition leader, each response
decoded whole by `columnar` and handed to Spark in Arrow batches of at most BATCH_ROWS rows.

Connections outlive tasks: a Python worker runs task after task (every micro-batch of a stream
reads the same partitions), so a fetcher that finished its range cleanly is kept, per worker
process, for the next task of the same partition; a task then costs one Fetch round trip instead
of a connection and a Metadata request. A kept fetcher that fails its first request (the broker
closed the idle connection, the leader moved) is replaced once by a fresh one. While a response
is decoded the next fetch is already on its way. The offsets a task reads lie below the end the
driver planned from the high watermark (or last stable offset), so they exist: fetches do not
ask the broker to wait for data. Anything but plain data (an error, aborted transactions, a
corrupt batch, a gap at the very start) stops this path quietly, at the offset reached, and
the caller continues with a full client.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from spark_log.client.fetcher import FetchResult, FetchUnavailable, PartitionFetcher
from spark_log.records import CorruptRecordError, iter_batches

from .columnar import decode_with_next, whole_batches_end

log = logging.getLogger(__name__)

MAX_KEPT = 32  # fetchers kept per worker process (one per partition read lately)
FETCH_BYTES = 16 << 20  # a fetch after the first: ~145,000 records of 100-byte values
# A task's first fetch is small, so Spark has rows to work on while the large ones come.
FIRST_FETCH_BYTES = 1 << 20
# Rows of an Arrow batch handed to Spark: zero-copy slices of a fetch's. Spark's JVM works on a
# batch while the next is decoded, and the last one leaves it little to do once the worker is
# done (a whole 16 MiB fetch as one batch kept one side idle at each end of a task).
BATCH_ROWS = 20_000
FETCH_WAIT_MS = 0  # the data exists: a fetch that found none should not wait for some

_Key = tuple[str, str, int, bool]
_kept: OrderedDict[_Key, PartitionFetcher] = OrderedDict()
_lock = threading.Lock()


def read_direct(p: Any, builder: Any, reached: list[int]) -> Iterator[Any]:
    """Record batches of [reached[0], p.end) of p's partition; reached[0] ends at the next
    offset to read (p.end when all were read). `p` is a `range_reader.RangePartition`."""
    read_committed = str(p.kafka_conf.get("isolation.level", "read_committed")
                         ).lower() != "read_uncommitted"
    key = (p.bootstrap, p.topic, p.partition, read_committed)
    fetcher: PartitionFetcher | None = None
    healthy = False
    try:
        fetcher, result = _first_fetch(key, reached[0])
        healthy = True
        while result is not None:
            result = yield from _take(fetcher, result, p, builder, reached)
    except (FetchUnavailable, CorruptRecordError) as e:
        healthy = False
        log.debug("direct fetch of %s-%d stops at %d: %s", p.topic, p.partition, reached[0], e)
    finally:
        if fetcher is not None:
            if healthy and not fetcher.in_flight:
                _keep(key, fetcher)
            else:
                fetcher.close()


def _first_fetch(key: _Key, offset: int) -> tuple[PartitionFetcher, FetchResult]:
    size = min(FIRST_FETCH_BYTES, FETCH_BYTES)
    fetcher = _kept_fetcher(key)
    if fetcher is not None:
        try:
            return fetcher, fetcher.fetch(offset, size, FETCH_WAIT_MS)
        except FetchUnavailable as e:
            log.debug("kept fetcher of %s-%d failed (%s): connecting again", key[1], key[2], e)
            fetcher.close()
    bootstrap, topic, partition, read_committed = key
    fetcher = PartitionFetcher(bootstrap, topic, partition, read_committed=read_committed)
    try:
        return fetcher, fetcher.fetch(offset, size, FETCH_WAIT_MS)
    except FetchUnavailable:
        fetcher.close()
        raise


def _take(fetcher: PartitionFetcher, result: FetchResult, p: Any, builder: Any,
          reached: list[int]) -> Iterator[Any]:
    """Yield the batch of one fetch answer; returns the next answer, or None to stop."""
    if result.has_aborted:
        log.debug("direct fetch of %s-%d: aborted transactions at %d", p.topic, p.partition,
                  reached[0])
        return None
    ahead = _offset_after(result.records)
    if ahead is not None and reached[0] < ahead < p.end:
        fetcher.send_fetch(ahead, FETCH_BYTES, FETCH_WAIT_MS)  # decoded while it comes
    cols, next_offset = decode_with_next(result.records, builder.include_headers)
    if next_offset is None or next_offset <= reached[0]:
        log.debug("direct fetch of %s-%d: no batch at %d (%d bytes)", p.topic, p.partition,
                  reached[0], len(result.records))
        return None  # nothing more to read here now: the consumer path waits or reports
    lo = int(np.searchsorted(cols.offsets, reached[0], "left"))
    hi = int(np.searchsorted(cols.offsets, p.end, "left"))
    if hi > lo:
        if reached[0] == p.start and cols.offsets[lo] != p.start:
            return None  # a gap at the very start: the consumer path judges data loss
        reached[0] = int(cols.offsets[hi - 1]) + 1
        batch = builder.build_columns(p.topic, p.partition, cols, lo, hi)
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)
    reached[0] = max(reached[0], min(next_offset, p.end))
    if reached[0] >= p.end:
        return None
    if not fetcher.in_flight:
        fetcher.send_fetch(reached[0], FETCH_BYTES, FETCH_WAIT_MS)
    return fetcher.receive()


def _offset_after(records: memoryview) -> int | None:
    """The offset after the last whole batch of a fetch answer (headers only)."""
    last = None
    for view in iter_batches(records, 0, whole_batches_end(records)):
        last = view.header.next_offset
    return last


def _kept_fetcher(key: _Key) -> PartitionFetcher | None:
    with _lock:
        return _kept.pop(key, None)


def _keep(key: _Key, fetcher: PartitionFetcher) -> None:
    with _lock:
        old = _kept.pop(key, None)
        _kept[key] = fetcher
        evicted = [_kept.popitem(last=False)[1] for _ in range(len(_kept) - MAX_KEPT)]
    for f in [old, *evicted]:
        if f is not None:
            f.close()
