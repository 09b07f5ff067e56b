"""Helpers for the log cleaner tests: compacted-topic configs, keyed batches, reading a log back
and checking it is valid. Also used by the crash child process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from spark_log.records import Compression, Record, build_batch, iter_batches
from spark_log.records.batch_header import BatchHeader
from spark_log.storage.cleaner.cleaner import CleanerStats
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog

from .batches import DEFAULT_TS

Update = tuple[bytes, bytes | None]


def compact_config(**props: str) -> LogConfig:
    """A compacted topic with small segments and a dense index."""
    base = {"cleanup.policy": "compact", "internal.segment.bytes": "2048",
            "index.interval.bytes": "128", "message.timestamp.after.max.ms": str(10**12),
            "file.delete.delay.ms": "0", "min.cleanable.dirty.ratio": "0.01"}
    return LogConfig.from_properties({**base, **props})


def keyed_batch(updates: list[Update], *, timestamp: int = DEFAULT_TS,
                compression: Compression = Compression.NONE, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False) -> bytes:
    records = [Record(i, timestamp, key, value) for i, (key, value) in enumerate(updates)]
    return build_batch(records, compression=compression, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=transactional)


def write_updates(log: PartitionLog, updates: list[Update], *, per_batch: int = 5,
                  timestamp: int = DEFAULT_TS, **batch_options: object) -> None:
    """Append `updates` in batches of `per_batch` and move the high watermark to the end."""
    for i in range(0, len(updates), per_batch):
        log.append(keyed_batch(updates[i:i + per_batch], timestamp=timestamp,
                               **batch_options), leader_epoch=0)  # type: ignore[arg-type]
    log.update_high_watermark(log.log_end_offset)


def updates_over(keys: int, count: int, *, tombstone_every: int = 0) -> list[Update]:
    """`count` updates cycling over `keys` keys; every `tombstone_every`-th is a delete."""
    out: list[Update] = []
    for i in range(count):
        value = None if tombstone_every and i % tombstone_every == tombstone_every - 1 \
            else f"value-{i}".encode()
        out.append((f"key-{i % keys}".encode(), value))
    return out


def latest(updates: list[Update]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for key, value in updates:
        out[key] = value
    return out


@dataclass
class ReadBack:
    headers: list[BatchHeader]
    records: list[Record]

    def by_key(self) -> dict[bytes | None, bytes | None]:
        return {r.key: r.value for r in self.records}

    @property
    def offsets(self) -> list[int]:
        return [r.offset for r in self.records]


def read_all(log: PartitionLog, start: int | None = None) -> ReadBack:
    """Every batch from `start` (default: the log start) to the end, through `read`, checking
    CRCs, that batches follow each other and that every offset is inside its batch."""
    offset = log.log_start_offset if start is None else start
    headers: list[BatchHeader] = []
    records: list[Record] = []
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, 1 << 20).read_bytes()
        assert data, f"empty read at {offset} below the end {end}"
        for view in iter_batches(data):
            h = view.header
            assert not headers or h.base_offset > headers[-1].last_offset, "batches overlap"
            batch = view.records(verify_crc=True)
            assert all(h.base_offset <= r.offset <= h.last_offset for r in batch)
            headers.append(h)
            records.extend(batch)
            offset = h.next_offset
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "record offsets do not increase"
    return ReadBack(headers, records)


def clean(cleaner: LogCleaner) -> CleanerStats | None:
    """One round of `cleaner`, run to its end."""
    return asyncio.run(cleaner.clean_once())


def clean_until_done(cleaner: LogCleaner, rounds: int = 20) -> int:
    """Rounds until no log needs cleaning; returns how many ran."""
    for done in range(rounds):
        if clean(cleaner) is None:
            return done
    raise AssertionError(f"still cleaning after {rounds} rounds")


class Crash(BaseException):
    """Raised by `StepFileSystem` at its crash point (BaseException: nothing catches it)."""


# Crash points: (operation, file name suffix, occurrence within a group); the crash happens
# just before that operation.
CRASH_POINTS: dict[str, tuple[str, str, int]] = {
    "while writing .cleaned": ("write", ".log.cleaned", 1),
    "after .cleaned written": ("rename", ".cleaned", 1),
    "between .swap renames": ("rename", ".cleaned", 2),
    "after .swap renames": ("rename_to", ".deleted", 1),
    "between old segment deletions": ("rename_to", ".deleted", 4),
    "after old segment deletion": ("rename", ".swap", 1),
    "between final renames": ("rename", ".swap", 2),
    "before the checkpoint": ("rename", "cleaner-offset-checkpoint.tmp", 1),
}


class StepFileSystem(FileSystem):
    """Crashes just before a chosen operation of a cleaning round (see CRASH_POINTS), once
    `armed` and `skip_groups` cleaned segments have been swapped in: `crash()` raises `Crash`
    by default; a child process sends itself SIGKILL instead. A swap is complete at the
    directory fsync after its `.swap` files were renamed."""

    def __init__(self, point: str, crash: Callable[[], None] | None = None,
                 skip_groups: int = 0) -> None:
        self.op, self.suffix, self.occurrence = CRASH_POINTS[point]
        self.skip_groups = skip_groups
        self.crash = crash or self._raise
        self.seen = self.swapped = 0
        self.armed = False
        self._last_rename = ""
        self._fd_paths: dict[int, str] = {}

    @staticmethod
    def _raise() -> None:
        raise Crash

    def _step(self, op: str, path: str) -> None:
        if self.armed and self.swapped >= self.skip_groups and op == self.op and \
                path.endswith(self.suffix):
            self.seen += 1
            if self.seen == self.occurrence:
                self.crash()

    def rename(self, src: str, dst: str) -> None:
        self._step("rename", src)
        self._step("rename_to", dst)
        super().rename(src, dst)
        self._last_rename = src

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        if self._last_rename.endswith(".swap"):
            self.swapped += 1
        self._last_rename = ""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self._fd_paths[fd] = path
        return fd

    def pwritev(self, fd, buffers, offset):  # type: ignore[no-untyped-def]
        self._step("write", self._fd_paths.get(fd, ""))
        return super().pwritev(fd, buffers, offset)
