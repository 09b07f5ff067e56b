"""The CRC-32C libraries compared, on the sizes a broker checks; prints ratios, not a test.

`spark_log.records.crc` (fastcrc) against the crc32c package it replaced (the tests' reference),
on memoryview slices as the log hands them: a one-record batch, a typical producer batch, the
largest default batch (1 MiB). Both run in the same process, rounds interleaved, best of each.

Usage, from the repository root: PYTHONPATH=. python bench/crc32c_libraries.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import crc32c as reference

from spark_log.records.crc import crc32c

SIZES = (100, 16 << 10, 1 << 20)  # bytes a batch's CRC covers


def per_call(fn: Callable[[], object], size: int, repeat: int) -> float:
    """Best time of one call, in seconds (calls batched so a round takes ~20 ms)."""
    calls = max(1, (20 << 20) // max(size, 1024))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'bytes':>9} {'crc32c pkg':>12} {'fastcrc':>12} {'speed-up':>9}")
    for size in SIZES:
        view = memoryview(os.urandom(size + 21))[21:]  # as a batch's CRC covers it
        assert crc32c(view) == reference.crc32c(view)
        old = new = float("inf")
        for _ in range(3):  # interleaved, so both see the same machine
            old = min(old, per_call(lambda v=view: reference.crc32c(v), size, args.repeat))
            new = min(new, per_call(lambda v=view: crc32c(v), size, args.repeat))
        print(f"{size:>9} {old * 1e6:>10.2f}us {new * 1e6:>10.2f}us {old / new:>8.2f}x"
              f"   ({size / new / 1e9:.1f} GB/s)")


if __name__ == "__main__":
    main()
