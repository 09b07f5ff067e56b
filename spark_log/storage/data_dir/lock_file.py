"""The `.lock` file of a data directory: one broker per directory, as Kafka enforces.

The broker takes an exclusive, non-blocking `flock` on `<data-dir>/.lock` before it reads
anything and holds it until it exits; the kernel drops the lock when the process dies, so a
crashed broker never leaves the directory locked. A second broker on the same directory fails
at once with a message that says why, instead of two processes appending to the same files.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from spark_log.properties import ConfigError

FILE_NAME = ".lock"


class DataDirLock:
    """Held from `acquire()` to `release()`. Not reentrant."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(
                f"Failed to acquire lock on file {self.path}: another broker process is using "
                f"the data directory {self.path.parent}") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
