"""Kafka's checkpoint file format, written atomically and durably.

Format (text, one entry a line)::

    0                      <- version
    2                      <- number of entries
    orders 0 1234          <- topic partition offset   (offset checkpoints)
    orders 1 99

The leader-epoch-checkpoint uses the same frame with `epoch start_offset` lines. A write goes to
`<name>.tmp`, which is fsynced, renamed over the file, and the directory fsynced: a crash leaves
either the old or the new file, never a torn one. Used for recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint and leader-epoch-checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from spark_log.storage.filesystem import DEFAULT_FS, FileSystem

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

T = TypeVar("T")
TopicPartition = tuple[str, int]


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse; the message names the file and the line."""


class CheckpointFile:
    """One checkpoint file. Stateless apart from its path; not thread-safe for concurrent writes."""

    def __init__(self, path: str, fs: FileSystem = DEFAULT_FS) -> None:
        self.path = path
        self.fs = fs

    def write_lines(self, lines: Sequence[str], *, sync: bool = True) -> None:
        """Replace the file atomically (a temporary file renamed over it); `sync=False` skips
        both fsyncs, for content that is derived again at every start anyway."""
        body = "".join(f"{line}\n" for line in (str(VERSION), str(len(lines)), *lines))
        staged = self.path + ".tmp"
        fd = self.fs.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.fs.write_fully(fd, [body.encode()], 0)
            if sync:
                self.fs.fsync(fd)
        finally:
            self.fs.close(fd)
        self.fs.rename(staged, self.path)
        if sync:
            self.fs.fsync_dir(os.path.dirname(self.path) or ".")

    def read_lines(self, parse: Callable[[list[str]], T], fields: int) -> list[T]:
        """Entries parsed by `parse` from each line's whitespace-split fields; [] if no file.

        Raises CorruptCheckpointError for a wrong version, count or malformed line.
        """
        data = _read_file(self.path)  # every partition has one: no text-file machinery
        if data is None:
            return []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(f"{self.path}: not text ({e})") from None
        lines = text.replace("\r\n", "\n").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            raise CorruptCheckpointError(f"{self.path}: missing version or count line")
        if lines[0].strip() != str(VERSION):
            raise CorruptCheckpointError(f"{self.path}: unrecognised version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise CorruptCheckpointError(f"{self.path}: bad entry count {lines[1]!r}") from None
        entries = lines[2:]
        if count != len(entries):
            raise CorruptCheckpointError(
                f"{self.path}: expected {count} entries but found {len(entries)}")
        out = []
        for n, line in enumerate(entries, start=3):
            parts = line.split()
            try:
                if len(parts) != fields:
                    raise ValueError
                out.append(parse(parts))
            except ValueError:
                raise CorruptCheckpointError(
                    f"{self.path}: malformed line {n}: {line!r}") from None
        return out


def _read_file(path: str) -> bytes | None:
    """The whole file, or None if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class OffsetCheckpointFile:
    """`topic partition offset` entries: the per-directory offset checkpoints."""

    def __init__(self, path: str, fs: FileSystem = DEFAULT_FS) -> None:
        self.file = CheckpointFile(path, fs)

    @property
    def path(self) -> str:
        return self.file.path

    def write(self, offsets: dict[TopicPartition, int] | Iterable[tuple[TopicPartition, int]]
              ) -> None:
        items = offsets.items() if isinstance(offsets, dict) else offsets
        self.file.write_lines([f"{t} {p} {o}" for (t, p), o in sorted(items)])

    def read(self) -> dict[TopicPartition, int]:
        entries = self.file.read_lines(_offset_entry, 3)
        return dict(entries)


def _offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    partition, offset = int(fields[1]), int(fields[2])
    if partition < 0 or offset < 0:
        raise ValueError("negative partition or offset")
    return (fields[0], partition), offset
