"""Child process for test_crash_recovery: appends batches forever to one partition with
flush.messages=1 and prints each append's last offset once the append has returned (so every
printed offset is durable), at a leader epoch of its own. The parent kills it with SIGKILL at a
random moment.

Usage: python -m tests.storage.crash_child <data dir> <seed>
"""

from __future__ import annotations

import random
import sys

from spark_log.storage import LogConfig, LogManager

from .batches import make_batch

CONFIG = LogConfig.from_properties({
    "flush.messages": "1",
    "internal.segment.bytes": str(1 << 20),
    "segment.index.bytes": str(64 << 10),
    "index.interval.bytes": "1024",
    "max.message.bytes": str(1 << 20),
    "message.timestamp.after.max.ms": str(10**12),
})


def main() -> None:
    data_dir, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    manager = LogManager(data_dir, default_config=CONFIG)
    log = manager.get_or_create("crash", 0)
    # Each run leads at a new epoch, recorded at the log end before its first append, as a
    # broker taking the leadership does.
    epoch = seed + 1
    log.leader_epoch_cache.assign(epoch, log.log_end_offset)
    while True:
        # mostly small batches, now and then a large one so a kill can tear a write
        size = rng.choice((20, 200, 2000)) if rng.random() < 0.9 else 300_000
        batch = make_batch(rng.randint(1, 5), value_size=size // 5)
        info = log.append(batch, leader_epoch=epoch)
        sys.stdout.write(f"{info.last_offset}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
