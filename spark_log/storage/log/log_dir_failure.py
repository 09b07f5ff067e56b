"""The failed state of a data directory: the first I/O error, or a batch found damaged by a read,
takes every log in it offline.

Kafka's LogDirFailureChannel: an I/O error in any log marks the whole directory offline, since
the disk under it can no longer be trusted. Storage never retries a failed write or fsync (after
a failed fsync the page cache may have dropped the dirty pages, so a retry that succeeds would
hide lost data); the broker must restart, and recovery then truncates whatever is not durable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from spark_log.storage.errors import KafkaStorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


class LogDirFailure:
    """Shared by the logs of one data directory. Not thread-safe (one broker thread uses it)."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.error: KafkaStorageError | None = None
        # Called once, on the first failure (the log manager saves the recovery points).
        self.on_failure: list[Callable[[], None]] = []

    @property
    def failed(self) -> bool:
        return self.error is not None

    def check(self) -> None:
        """Raise the recorded failure, if any."""
        if self.error is not None:
            raise KafkaStorageError(f"log directory {self.data_dir} is offline: {self.error}")

    def guard(self, action: str, *about: object) -> _Guard:
        """Run a block of I/O steps: refuse if already failed; an OSError inside fails the
        directory. `action % about` names the steps in the error, formatted only on failure:
        every read and append passes here or through `run`."""
        return _Guard(self, action, about)

    def run(self, action: str, about: object, call: Callable[..., T], *args: object) -> T:
        """`call(*args)` as one guarded I/O step (`guard` for a block) without its object:
        for steps every fetch takes. `action % about` names it in the error."""
        if self.error is not None:
            self.check()
        try:
            return call(*args)
        except OSError as e:
            raise self.fail(action % (about,), e) from e

    def fail(self, action: str, cause: Exception) -> KafkaStorageError:
        """Take the directory offline (an I/O error, or a batch found damaged); returns the
        error to raise."""
        error = KafkaStorageError(f"error while {action}: {cause}")
        if self.error is None:
            self.error = error
            log.error("Log directory %s is offline after an error while %s: %s; its partitions "
                      "answer KAFKA_STORAGE_ERROR until the broker is restarted", self.data_dir,
                      action, cause)
            for hook in self.on_failure:
                hook()
        return error


class _Guard:
    """`with failure.guard(action, *about):` (see `LogDirFailure.guard`). A plain object, not a
    generator context manager."""

    __slots__ = ("about", "action", "failure")

    def __init__(self, failure: LogDirFailure, action: str, about: tuple[object, ...]) -> None:
        self.failure, self.action, self.about = failure, action, about

    def __enter__(self) -> None:
        self.failure.check()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if isinstance(error, OSError):
            action = self.action % self.about if self.about else self.action
            raise self.failure.fail(action, error) from error
