"""Storage throughput benchmark; prints ratios measured in one run, not a test.

Append: `PartitionLog.append` of 1 MiB batches (validation with CRC, offset assignment, one
write, index upkeep) against plain `os.write` of the same bytes to a file in the same
directory (goal: ratio >= 0.8). Read: the fetch path (`PartitionLog.read` slices sent with
`os.sendfile`) against `os.pread` of the same ranges, to /dev/null and through a socket pair.
Everything stays in the page cache (no fsync), as with Kafka's default flush settings.

Usage, from the repository root: PYTHONPATH=. python bench/storage_append.py [--mib N] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable

from spark_log.records import Record, build_batch
from spark_log.storage import LogConfig, PartitionLog

BATCH_BYTES = 1 << 20
CHUNK = 1 << 20


RECORDS_PER_BATCH = 1038  # of 1000-byte values: just under 1 MiB, within max.message.bytes


def one_mib_batch() -> bytes:
    now = time.time_ns() // 1_000_000
    value = os.urandom(1000)
    records = [Record(offset=i, timestamp=now, key=None, value=value, headers=())
               for i in range(RECORDS_PER_BATCH)]
    return build_batch(records)


def best_of(repeat: int, run: Callable[[], float]) -> float:
    best = float("inf")
    for _ in range(repeat):
        os.sync()  # start each round without dirty pages from the last one
        best = min(best, run())
    return best


def compare(repeat: int, a: Callable[[], float], b: Callable[[], float]) -> tuple[float, float]:
    """Best times of `a` and `b`, their rounds interleaved so both see the same machine."""
    times_a, times_b = [], []
    for _ in range(repeat):
        times_a.append(best_of(1, a))
        times_b.append(best_of(1, b))
    return min(times_a), min(times_b)


def time_plain_write(directory: str, batch: bytes, count: int) -> float:
    path = os.path.join(directory, "plain.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, batch)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        os.remove(path)


def time_log_append(directory: str, batch: bytes, count: int) -> float:
    data_dir = tempfile.mkdtemp(dir=directory)
    log = PartitionLog(data_dir, "bench", 0, LogConfig())
    try:
        start = time.perf_counter()
        for _ in range(count):
            log.append(batch, leader_epoch=0)
        return time.perf_counter() - start
    finally:
        log.release()
        shutil.rmtree(data_dir)


def fill_log(directory: str, batch: bytes, count: int) -> PartitionLog:
    log = PartitionLog(tempfile.mkdtemp(dir=directory), "bench", 0, LogConfig())
    for _ in range(count):
        log.append(batch, leader_epoch=0)
    return log


def slices(log: PartitionLog) -> list:  # type: ignore[type-arg]
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        s = log.read(offset, CHUNK)
        out.append(s)
        offset += RECORDS_PER_BATCH  # one batch per slice
    return out


def time_reads(log: PartitionLog, out_fd: int, use_sendfile: bool) -> float:
    start = time.perf_counter()
    for s in slices(log):
        if use_sendfile:
            s.send_to(out_fd)
        else:
            data = os.pread(s.fileno(), s.size, s.position)
            if out_fd >= 0:
                os.write(out_fd, data)
    return time.perf_counter() - start


def drain(sock: socket.socket) -> None:
    while sock.recv(1 << 20):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256, help="MiB appended per round")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    batch = one_mib_batch()
    directory = tempfile.mkdtemp(prefix="storage-bench-")
    try:
        plain, ours = compare(args.repeat, lambda: time_plain_write(directory, batch, args.mib),
                              lambda: time_log_append(directory, batch, args.mib))
        mib = args.mib * len(batch) / 2**20
        print(f"append {args.mib} x {len(batch)} B batches (best of {args.repeat}):")
        print(f"  os.write          {mib / plain:8.0f} MiB/s")
        print(f"  PartitionLog      {mib / ours:8.0f} MiB/s   ratio {plain / ours:.2f}")

        log = fill_log(directory, batch, args.mib)
        with open(os.devnull, "wb") as null:
            pread, send = compare(args.repeat, lambda: time_reads(log, null.fileno(), False),
                                  lambda: time_reads(log, null.fileno(), True))
        print("read the log back in 1 MiB slices, to /dev/null:")
        print(f"  os.pread          {mib / pread:8.0f} MiB/s")
        print(f"  slice sendfile    {mib / send:8.0f} MiB/s   ratio {pread / send:.2f}")
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        reader = threading.Thread(target=drain, args=(b,), daemon=True)
        reader.start()
        pread_sock, send_sock = compare(args.repeat, lambda: time_reads(log, a.fileno(), False),
                                        lambda: time_reads(log, a.fileno(), True))
        a.close()
        reader.join()
        b.close()
        print("read the log back in 1 MiB slices, through a socket pair:")
        print(f"  pread + write     {mib / pread_sock:8.0f} MiB/s")
        print(f"  slice sendfile    {mib / send_sock:8.0f} MiB/s   ratio "
              f"{pread_sock / send_sock:.2f}")
        log.release()
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
