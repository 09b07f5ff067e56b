"""Helpers of the quorum tests: batches, snapshot bytes in Kafka's shape (RecordBatches), a file
system that fails an operation with EIO once armed, and waiting for a condition with a
deadline (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import errno
import json
import time
from collections.abc import Callable, Sequence

from spark_log.raft.messages import Batch
from spark_log.raft.replica import LEADER_CHANGE_RECORD
from spark_log.records import Record, build_batch, decode_batch
from spark_log.storage.filesystem import FileSystem


def data_batch(base: int, epoch: int, *values: bytes) -> Batch:
    return Batch(base, epoch, tuple(values))


def epoch_start(base: int, epoch: int) -> Batch:
    """The leader's epoch-start control batch, as raft makes it."""
    return Batch(base, epoch, (LEADER_CHANGE_RECORD,), control=True)


def history(epochs: Sequence[int], per_epoch: int = 3) -> list[Batch]:
    """A log: for each epoch its start marker, then `per_epoch` one-record batches."""
    out: list[Batch] = []
    offset = 0
    for epoch in epochs:
        out.append(epoch_start(offset, epoch))
        offset += 1
        for i in range(per_epoch):
            out.append(data_batch(offset, epoch, f"e{epoch}-r{i}".encode()))
            offset += 1
    return out


def snapshot_bytes(state: object) -> bytes:
    """An application's state as one RecordBatch (what the default snapshot check wants)."""
    return build_batch([Record(0, 0, b"state", json.dumps(state).encode())])


def snapshot_state(data: bytes) -> object:
    return json.loads(decode_batch(data).records[0].value or b"null")


class FailingFileSystem(FileSystem):
    """Fails `op` ("fsync" or "write") with EIO once `armed`."""

    def __init__(self, op: str = "fsync") -> None:
        self.op, self.armed, self.failures = op, False, 0

    def _check(self, op: str) -> None:
        if self.armed and op == self.op:
            self.failures += 1
            raise OSError(errno.EIO, f"injected {op} failure")

    def fsync(self, fd: int) -> None:
        self._check("fsync")
        super().fsync(fd)

    def pwritev(self, fd, buffers, offset):  # type: ignore[no-untyped-def]
        self._check("write")
        return super().pwritev(fd, buffers, offset)


async def eventually(check: Callable[[], object], timeout_s: float = 10.0,
                     what: str = "a condition") -> object:
    """Poll `check` until it returns something true; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)
