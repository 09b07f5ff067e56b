"""The log cleaner: compaction of every log with cleanup.policy=compact (Kafka's LogCleaner and
its cleaner thread), run from the broker's asyncio event loop.

Each round picks the dirtiest log (`LogCleanerManager`), plans on the event-loop thread what to
read (`plan_round`), runs the heavy work (`build_offset_map`, then `clean_group` per group of
segments: reading old immutable segments, writing new `.cleaned` files) through a driver, and
swaps each cleaned segment in on the event-loop thread (`PartitionLog.replace_segments`). When
a round finishes, the cleaner checkpoint moves to the end of the cleaned range. When no log
needs cleaning the cleaner sleeps log.cleaner.backoff.ms, or until `wake()`.

Drivers: `ThreadDriver` (the default) runs the work on one worker thread while the event loop
keeps serving requests, letting the GIL go every millisecond; `InlineDriver` runs it on the
event loop itself, yielding every 0.5 ms. Measured while a round cleans 64 MiB
(bench/log_cleaner.py, docs/benchmarks.md), the loop wakes late by a median of ~0.2 ms with the
thread (0.65-5 ms if the worker held the GIL for the interpreter's 5 ms turns), 1.1-2 ms
inline, for about the same round time; the thread also keeps fsyncs and file I/O off the loop
(and the closing of the files a round replaced), so it is the default. Either way the work
touches only its round's snapshot.

Aborting: `stop()` and `abort(log)` (called before a log is deleted) set the round's abort flag,
which the work checks between chunks; the round then removes its `.cleaned` files and leaves
the checkpoint alone. An I/O error takes the data directory offline, as any storage I/O error
does; a batch the cleaner cannot parse marks the log uncleanable until restart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Generator
from typing import Protocol, TypeVar

from spark_log.clock import Clock
from spark_log.deadline import within
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.cleaner.cleaner import (
    CleanerStats,
    CleaningAborted,
    CleaningRound,
    SegmentSource,
    build_offset_map,
    clean_group,
    group_segments,
    plan_round,
)
from spark_log.storage.cleaner.cleaner_batch_policy import KEEP_PRODUCER_STATE, BatchPolicyFactory
from spark_log.storage.cleaner.cleaner_config import CleanerConfig
from spark_log.storage.cleaner.cleaner_manager import (
    LastStableOffset,
    LogCleanerManager,
    own_last_stable_offset,
)
from spark_log.storage.cleaner.cleaner_offset_map import OffsetMap
from spark_log.storage.errors import KafkaStorageError
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.segment import Segment

log = logging.getLogger(__name__)

T = TypeVar("T")
INLINE_SLICE_S = 0.0005  # InlineDriver: longest stretch of work between two yields
THREAD_SLICE_S = 0.001  # ThreadDriver: longest stretch of work holding the GIL
ABORT_WAIT_S = 30.0


class Driver(Protocol):
    async def run(self, work: Generator[None, None, T]) -> T: ...

    def wait_idle(self, timeout_s: float) -> None: ...

    def discard(self, garbage: list[object]) -> None: ...

    def close(self) -> None: ...


class ThreadDriver:
    """Runs each step on one worker thread; the event loop only awaits it."""

    def __init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="log-cleaner")
        self._current: concurrent.futures.Future[object] | None = None

    async def run(self, work: Generator[None, None, T]) -> T:
        future = self._executor.submit(_drain, work)
        self._current = future
        return await asyncio.wrap_future(future)  # type: ignore[return-value]

    def wait_idle(self, timeout_s: float) -> None:
        """Block until the step in progress, if any, has returned or raised."""
        if self._current is not None:
            concurrent.futures.wait([self._current], timeout_s)

    def discard(self, garbage: list[object]) -> None:
        """Empty `garbage` on the worker, after the work already queued. A round's last
        references to the files of the segments it replaced go there: closing a deleted file
        makes the kernel free its cached pages (~4 ms per 16 MiB), which would otherwise hold up
        the event loop."""
        try:
            self._executor.submit(garbage.clear)
        except RuntimeError:  # shut down
            garbage.clear()

    def close(self) -> None:
        self._executor.shutdown(wait=True)


class InlineDriver:
    """Runs each step on the event loop, yielding to other tasks every INLINE_SLICE_S."""

    async def run(self, work: Generator[None, None, T]) -> T:
        try:
            deadline = time.perf_counter() + INLINE_SLICE_S
            while True:
                next(work)
                if time.perf_counter() >= deadline:
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + INLINE_SLICE_S
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            work.close()

    def wait_idle(self, timeout_s: float) -> None:
        """Nothing runs between yields: the aborted step stops at its next check."""

    def discard(self, garbage: list[object]) -> None:
        garbage.clear()

    def close(self) -> None:
        pass


def _drain(work: Generator[None, None, T]) -> T:
    """Run `work` to its end, letting the GIL go every THREAD_SLICE_S (between two steps): a
    waiting event loop then runs within about a millisecond instead of the interpreter's 5 ms
    switch interval."""
    clock = time.perf_counter
    try:
        deadline = clock() + THREAD_SLICE_S
        while True:
            next(work)
            if clock() >= deadline:
                time.sleep(0)
                deadline = clock() + THREAD_SLICE_S
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class LogCleaner:
    """Cleans the compacted logs of one LogManager, one round at a time.

    Invariants: at most one round runs; a round's log is in the manager's in-progress set
    until the round ends; cleaned segments are swapped in only on the event-loop thread.
    Thread-safety: every method runs on the event-loop thread that owns the logs; only the
    driver's work runs elsewhere, on a snapshot (`CleaningRound`) it shares with nothing but
    the abort flag.
    """

    def __init__(self, logs: LogManager, config: CleanerConfig | None = None, *,
                 clock: Clock | None = None,
                 last_stable_offset: LastStableOffset = own_last_stable_offset,
                 batch_policy: BatchPolicyFactory = KEEP_PRODUCER_STATE,
                 driver: Driver | None = None) -> None:
        self.logs = logs
        self.config = config or CleanerConfig()
        self.clock = clock or logs.clock
        self.manager = LogCleanerManager(logs, logs.fs, last_stable_offset)
        self.batch_policy = batch_policy
        self.driver: Driver = driver or ThreadDriver()
        self.offset_map = OffsetMap(self.config.dedupe_buffer_size,
                                    self.config.dedupe_buffer_load_factor)
        self.rounds = 0  # rounds that cleaned a log to the end (for tests and metrics)
        self._round: CleaningRound | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False

    @property
    def current_round(self) -> CleaningRound | None:
        """The round in progress, if any."""
        return self._round

    # ---- service ------------------------------------------------------------------------

    def start(self) -> None:
        """Start cleaning in the background (nothing if log.cleaner.enable is false)."""
        if not self.config.enable or self._task is not None:
            return
        self.logs.before_delete.append(self.abort)
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="log-cleaner")

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff."""
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        """Abort the round in progress, wait for it to end, and stop."""
        self._stopping = True
        if self._round is not None:
            self._round.abort.set()
        self.wake()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(ValueError):
            self.logs.before_delete.remove(self.abort)
        self.driver.close()

    def abort(self, partition_log: PartitionLog) -> None:
        """Stop the round on `partition_log`, if one runs, before the log goes away; blocks
        until its worker has let go of the log's files."""
        rnd = self._round
        if rnd is not None and rnd.log is partition_log:
            rnd.abort.set()
            self.driver.wait_idle(ABORT_WAIT_S)

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            try:
                stats = await self.clean_once()
            except Exception:
                log.exception("log cleaner round failed")
                stats = None
            if stats is None and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    await within(self.config.backoff_ms / 1000, self._wake.wait())
                self._wake.clear()

    # ---- one round ----------------------------------------------------------------------

    async def clean_once(self) -> CleanerStats | None:
        """Clean the dirtiest log that needs it; its stats, or None if no log needed it."""
        candidate = self.manager.grab_filthiest(self.clock.now_ms())
        if candidate is None:
            return None
        partition_log = candidate.log
        rnd: CleaningRound | None = None
        end: int | None = None
        try:
            rnd = self._round = plan_round(candidate, clock=self.clock,
                                           policy=self.batch_policy)
            end = await self._clean(rnd)
        except CleaningAborted as e:
            log.info("%s", e)
        except CorruptRecordError as e:
            log.error("Cannot clean %s, skipping it until restart: %s", partition_log.name, e)
            self.manager.mark_uncleanable(partition_log)
        except OSError as e:
            self._io_error(partition_log, rnd, e)
        except KafkaStorageError as e:
            log.error("Cleaning %s stopped: %s", partition_log.name, e)
        finally:
            self._round = None
            if rnd is not None:  # the only references to its sources' files left: see discard
                garbage: list[object] = [rnd.sources]
                rnd.sources = []
                self.driver.discard(garbage)
            self.offset_map.clear()
            self.manager.done_cleaning(partition_log, end)
        if rnd is None:
            return CleanerStats()
        rnd.stats.ended = time.monotonic()
        if end is not None:
            self.rounds += 1
            _log_stats(rnd, end)
        return rnd.stats

    async def _clean(self, rnd: CleaningRound) -> int:
        io_size = self.config.io_buffer_size
        end = await self.driver.run(build_offset_map(rnd, self.offset_map, io_size))
        sources = [s for s in rnd.sources if s.base_offset < end]
        groups = group_segments(sources, rnd.config.segment_size,
                                rnd.config.segment_index_bytes, rnd.first_uncleanable_offset)
        for group in groups:
            cleaned = await self.driver.run(clean_group(rnd, group, self.offset_map, io_size))
            self._swap(rnd, group, cleaned)
        return end

    def _swap(self, rnd: CleaningRound, group: list[SegmentSource], cleaned: Segment) -> None:
        partition_log = rnd.log
        current = self.logs.get(partition_log.topic, partition_log.partition) is partition_log
        if rnd.abort.is_set() or not current or \
                not partition_log.replace_segments(cleaned, [s.segment for s in group]):
            cleaned.delete_files()
            raise CleaningAborted(f"cleaning of {partition_log.name} aborted: its segments "
                                  "changed meanwhile")

    def _io_error(self, partition_log: PartitionLog, rnd: CleaningRound | None,
                  error: OSError) -> None:
        if (rnd is not None and rnd.abort.is_set()) or \
                self.logs.get(partition_log.topic, partition_log.partition) is not partition_log:
            log.info("Cleaning of %s stopped: the log is gone (%s)", partition_log.name, error)
            return
        partition_log.failure.fail(f"cleaning {partition_log.name}", error)


def _log_stats(rnd: CleaningRound, end: int) -> None:
    stats, f = rnd.stats, rnd.stats.filter
    elapsed = max(stats.ended - stats.started, 1e-9)
    mib = 1 << 20
    log.info(
        "Cleaned %s up to offset %d in %.3f s: %d group(s); offset map over %.1f MiB (%d "
        "records); rewrote %.1f MiB to %.1f MiB, %d of %d records kept (%.1f MiB/s)",
        rnd.log.name, end, elapsed, stats.groups, stats.map_bytes_read / mib,
        stats.map_messages_read, f.bytes_read / mib, f.bytes_retained / mib,
        f.messages_retained, f.messages_read, f.bytes_read / mib / elapsed)
