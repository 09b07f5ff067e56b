"""The broker process's C allocator: freed request buffers are kept for the next request instead
of going back to the kernel.

A produce request of a megabyte arrives in reads of up to 256 KiB and is joined into one frame;
each of those buffers is allocated, written and freed once per request. glibc's malloc serves
such sizes by mapping fresh pages (above its mmap threshold, 128 KiB until it adapts) or from
the top of its heap, which it trims back to the kernel once more than twice that threshold lies
free there. Either way every buffer's pages fault in again, zeroed by the kernel: with batched
produce at 100 MB/s, 120,000 page faults for 300 MB and two thirds of the broker's CPU in the
kernel (docs/benchmarks.md, the request path's seventh round). Raising both thresholds lets the
heap keep up to TRIM_THRESHOLD of freed memory for reuse, as a JVM broker keeps its heap.

Only the broker's own process does this (`python -m spark_log.broker`, `spark-log broker`),
never a process that merely imports spark_log. A MALLOC_* environment variable, glibc's own
way to set these, wins; without glibc (musl, macOS) nothing changes.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 16 * 1024 * 1024  # allocations below this come from the heap
TRIM_THRESHOLD = 32 * 1024 * 1024  # freed heap kept before any is returned to the kernel


def keep_freed_buffers(environ: dict[str, str] | None = None) -> bool:
    """Set glibc's mmap and trim thresholds for a long-running broker; returns whether it did.
    Leaves them alone when the environment sets any MALLOC_ tunable or glibc is absent."""
    env = os.environ if environ is None else environ
    if any(name.startswith("MALLOC_") for name in env) or "GLIBC_TUNABLES" in env:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first, since setting it fixes the trim
    # threshold's dynamic adjustment too
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and \
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not done:
        log.debug("glibc refused the allocator thresholds; they stay adaptive")
    return done
