"""Log cleaner benchmark; prints figures measured in one run, not a test.

Throughput: one cleaning round over a dirty compacted log (offset map over every segment, then
every group rewritten, fsynced and swapped in) against `os.pread` of the same segment files in
1 MiB chunks, rounds interleaved, best of --repeat. The figure is MiB/s of dirty log, and its
ratio to the read.

Responsiveness: while a round runs, a task on the same event loop sleeps 1 ms in a loop and
records how late it wakes (what a request waiting on the loop would suffer), for each driver:
`ThreadDriver` (work on a worker thread that lets the GIL go every millisecond), the same
holding the GIL for the interpreter's 5 ms switch interval, and `InlineDriver` (work on the
loop, yielding every 0.5 ms); and with no cleaning, as the baseline.

Usage, from the repository root: PYTHONPATH=. python bench/log_cleaner.py [--mib N] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time

from spark_log.clock import SYSTEM_CLOCK
from spark_log.records import Record, build_batch
from spark_log.storage import LogConfig, LogManager
from spark_log.storage.cleaner import log_cleaner
from spark_log.storage.cleaner.log_cleaner import Driver, InlineDriver, LogCleaner, ThreadDriver

KEYS = 10_000
VALUE = 100
PER_BATCH = 200
MIB = 1 << 20
CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(16 * MIB),
          "message.timestamp.after.max.ms": str(10**12), "file.delete.delay.ms": "0"}


def build_log(directory: str, mib: int) -> int:
    """A compacted log of about `mib` MiB of updates over KEYS keys; returns its dirty bytes."""
    logs = LogManager(directory, default_config=LogConfig.from_properties(CONFIG))
    log = logs.get_or_create("bench", 0)
    value = os.urandom(VALUE)
    now = SYSTEM_CLOCK.now_ms()
    i = 0
    while log.size_bytes < mib * MIB:
        records = [Record(j, now, b"key-%06d" % ((i + j) * 7919 % KEYS), value)
                   for j in range(PER_BATCH)]
        log.append(build_batch(records), leader_epoch=0)
        i += PER_BATCH
    log.roll()
    size = sum(s.size for s in log.segments)
    logs.close()
    return size


def segment_files(directory: str) -> list[str]:
    part = os.path.join(directory, "bench-0")
    return sorted(os.path.join(part, n) for n in os.listdir(part) if n.endswith(".log"))


def time_read(directory: str) -> float:
    start = time.perf_counter()
    for path in segment_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, MIB, position):
                position += len(chunk)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def time_clean(directory: str, driver: Driver, lags: list[float] | None = None) -> float:
    """One round on a fresh copy of the log; `lags` collects the ticker's lateness (ms)."""
    logs = LogManager(directory, default_config=LogConfig.from_properties(CONFIG))
    logs.get("bench", 0).update_high_watermark(logs.get("bench", 0).log_end_offset)
    cleaner = LogCleaner(logs, driver=driver)

    async def run() -> float:
        ticker = asyncio.create_task(tick(lags)) if lags is not None else None
        start = time.perf_counter()
        stats = await cleaner.clean_once()
        elapsed = time.perf_counter() - start
        assert stats is not None and cleaner.rounds == 1
        if ticker is not None:
            ticker.cancel()
        return elapsed

    try:
        return asyncio.run(run())
    finally:
        logs.close()


async def tick(lags: list[float] | None) -> None:
    while True:
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        if lags is not None:
            lags.append((time.perf_counter() - start - 0.001) * 1000)


def baseline_lags(seconds: float) -> list[float]:
    lags: list[float] = []

    async def run() -> None:
        task = asyncio.create_task(tick(lags))
        await asyncio.sleep(seconds)
        task.cancel()

    asyncio.run(run())
    return lags


def fresh_copy(source: str, scratch: str) -> str:
    target = os.path.join(scratch, "copy")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    os.sync()
    return target


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def measure_lateness(source: str, scratch: str, driver: Driver, repeat: int
                     ) -> tuple[float, float, float, float]:
    """Median over `repeat` rounds of (round seconds, lateness p50, p99, max)."""
    runs = []
    for _ in range(repeat):
        lags: list[float] = []
        elapsed = time_clean(fresh_copy(source, scratch), driver, lags)
        runs.append((elapsed, percentile(lags, 50), percentile(lags, 99), max(lags)))
    return tuple(statistics.median(r[i] for r in runs) for i in range(4))  # type: ignore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="cleaner-bench-")
    thread = ThreadDriver()
    try:
        source = os.path.join(scratch, "source")
        dirty = build_log(source, args.mib) / MIB
        reads, cleans, cpus = [], [], []
        for _ in range(args.repeat):
            reads.append(time_read(fresh_copy(source, scratch)))
            copy = fresh_copy(source, scratch)
            cpu = time.process_time()
            cleans.append(time_clean(copy, thread))
            cpus.append(time.process_time() - cpu)
        read_rate, clean_rate = dirty / min(reads), dirty / min(cleans)
        print(f"dirty log: {dirty:.1f} MiB, {KEYS} keys, {VALUE}-byte values, "
              f"{PER_BATCH} records a batch; best of {args.repeat}")
        print(f"os.pread of the segments:   {read_rate:8.1f} MiB/s")
        print(f"cleaning round (wall time): {clean_rate:8.1f} MiB/s, "
              f"ratio {clean_rate / read_rate:.4f}")
        print(f"cleaning round (CPU time):  {dirty / min(cpus):8.1f} MiB/s")
        for name, driver, gil_slice in (
                ("thread", thread, log_cleaner.THREAD_SLICE_S),
                ("thread, GIL held for 5 ms turns", thread, float("inf")),
                ("inline", InlineDriver(), log_cleaner.THREAD_SLICE_S)):
            log_cleaner.THREAD_SLICE_S, kept = gil_slice, log_cleaner.THREAD_SLICE_S
            elapsed, p50, p99, worst = measure_lateness(source, scratch, driver, args.repeat)
            log_cleaner.THREAD_SLICE_S = kept
            print(f"{name} driver: round {elapsed:.2f} s; loop lateness p50 {p50:.2f} ms, "
                  f"p99 {p99:.2f} ms, max {worst:.2f} ms (medians)")
        idle = baseline_lags(2.0)
        print(f"no cleaning: loop lateness p50 {percentile(idle, 50):.2f} ms, "
              f"p99 {percentile(idle, 99):.2f} ms, max {max(idle):.2f} ms")
    finally:
        thread.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
