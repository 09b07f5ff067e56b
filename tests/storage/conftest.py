"""Fixtures shared by the storage tests: a manual clock, small-segment configs, file systems
that fail or count on demand."""

from __future__ import annotations

import errno
import os
from collections import Counter

import pytest

from spark_log.clock import ManualClock
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog

from .batches import DEFAULT_TS


class FaultyFileSystem(FileSystem):
    """Fails the chosen operation with EIO once `armed` is set."""

    def __init__(self, fail: str = "fsync") -> None:
        self.fail = fail
        self.armed = False
        self.failures = 0

    def _maybe_fail(self, op: str) -> None:
        if self.armed and op == self.fail:
            self.failures += 1
            raise OSError(errno.EIO, f"injected {op} failure")

    def fsync(self, fd: int) -> None:
        self._maybe_fail("fsync")
        super().fsync(fd)

    def pwritev(self, fd, buffers, offset):  # type: ignore[no-untyped-def]
        self._maybe_fail("write")
        return super().pwritev(fd, buffers, offset)


class CountingFileSystem(FileSystem):
    """Counts opens by file suffix (".index", ".timeindex", ".log", ...)."""

    def __init__(self) -> None:
        self.opened: Counter[str] = Counter()

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self.opened[os.path.splitext(path)[1]] += 1
        return super().open(path, flags, mode)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(DEFAULT_TS)


def small_config(**props: str) -> LogConfig:
    """Small segments and a dense index so tests roll and index often."""
    base = {"internal.segment.bytes": "4096", "index.interval.bytes": "256",
            "message.timestamp.after.max.ms": str(10**12)}
    return LogConfig.from_properties({**base, **props})


@pytest.fixture
def config() -> LogConfig:
    return small_config()


def open_log(data_dir: str, config: LogConfig, clock: ManualClock, **kwargs: object
             ) -> PartitionLog:
    return PartitionLog(str(data_dir), "t", 0, config, clock=clock, **kwargs)  # type: ignore
