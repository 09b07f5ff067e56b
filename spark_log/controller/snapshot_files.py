"""Snapshot files of the metadata log, named as Kafka names them:
`<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` in the partition directory, written
whole under a `.checkpoint.part` name, fsynced, renamed into place and the directory fsynced,
so a crash leaves either no snapshot or the whole one.

Their bytes are opaque here (the controller writes Kafka's snapshot format in them). Whether a
file can be trusted is a `SnapshotCheck`; the default one wants what Kafka writes: whole
RecordBatches with valid CRCs, at least one.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from spark_log.raft.messages import OffsetAndEpoch
from spark_log.records import CorruptRecordError, iter_batches, verify_crc
from spark_log.storage.filesystem import FileSystem

log = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
DAMAGED_SUFFIX = ".checkpoint.damaged"
SNAPSHOT_FILE = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")

SnapshotCheck = Callable[[bytes], str | None]  # the reason the bytes cannot be trusted


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def check_record_batches(data: bytes) -> str | None:
    """The default check: whole RecordBatches with valid CRCs, at least one."""
    if not data:
        return "it is empty"
    end = 0
    try:
        for batch in iter_batches(data):
            verify_crc(data, batch.position, batch.header)
            end = batch.position + batch.size
    except CorruptRecordError as e:
        return str(e)
    return None if end == len(data) else f"{len(data) - end} bytes after the last batch"


def list_snapshots(directory: Path) -> list[OffsetAndEpoch]:
    """The snapshot ids in `directory`, oldest first."""
    found = []
    for name in os.listdir(directory):
        m = SNAPSHOT_FILE.fullmatch(name)
        if m:
            found.append(OffsetAndEpoch(int(m.group(1)), int(m.group(2))))
    return sorted(found)


def remove_leftovers(directory: Path, fs: FileSystem) -> None:
    """Partial snapshots (a crash while writing one) and snapshots being deleted."""
    names = [n for n in os.listdir(directory) if n.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX))]
    for name in names:
        log.info("Removing leftover snapshot file %s", directory / name)
        fs.remove(str(directory / name))
    if names:
        fs.fsync_dir(str(directory))


def write_snapshot(directory: Path, snapshot_id: OffsetAndEpoch, data: bytes,
                   fs: FileSystem) -> None:
    """Write the snapshot file durably (see the module docstring)."""
    final = directory / snapshot_file_name(snapshot_id)
    partial = final.with_name(final.name + ".part")
    fd = fs.open(str(partial), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write_fully(fd, [data], 0)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(str(partial), str(final))
    fs.fsync_dir(str(directory))


def read_snapshot(directory: Path, snapshot_id: OffsetAndEpoch) -> bytes:
    return (directory / snapshot_file_name(snapshot_id)).read_bytes()


def set_aside(directory: Path, snapshot_id: OffsetAndEpoch, fs: FileSystem) -> Path:
    """Rename a damaged snapshot out of the way (kept for inspection, never read again)."""
    path = directory / snapshot_file_name(snapshot_id)
    aside = path.with_name(path.name.removesuffix(SUFFIX) + DAMAGED_SUFFIX)
    fs.rename(str(path), str(aside))
    fs.fsync_dir(str(directory))
    return aside


def delete_snapshots(directory: Path, doomed: Iterable[OffsetAndEpoch], fs: FileSystem) -> None:
    removed = False
    for snapshot_id in doomed:
        fs.remove(str(directory / snapshot_file_name(snapshot_id)))
        removed = True
    if removed:
        fs.fsync_dir(str(directory))
