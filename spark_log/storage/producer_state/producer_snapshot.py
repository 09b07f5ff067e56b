"""Producer state snapshot files: `<offset as 20 digits>.snapshot` in the partition directory
(Kafka's ProducerStateManager snapshot format, version 1).

A snapshot at offset N holds the state of every producer after applying the log below N, so
recovery reads the latest snapshot and replays only the batches from N on. Layout, big-endian::

    version int16 (1)   crc uint32 (CRC-32C of everything after it)   count int32
    count x (producer id int64, epoch int16, last sequence int32, last offset int64,
             offset delta int32, timestamp int64, coordinator epoch int32,
             current transaction first offset int64)

Only the newest batch of each producer is kept (as in Kafka), which is enough to validate the
next sequence; a retry of an older batch after a restart is answered OUT_OF_ORDER_SEQUENCE.
A file is written to `<name>.tmp`, fsynced and renamed, so a crash never leaves a torn
snapshot under the real name; a snapshot whose CRC or size does not check is ignored (and
deleted), and recovery falls back to an older one or to the log.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable

from spark_log.records.batch_header import NO_SEQUENCE
from spark_log.records.crc import crc32c
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.producer_state.producer_state_entry import (
    NO_OFFSET,
    BatchMetadata,
    ProducerStateEntry,
)

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers the count and the entries
SNAPSHOT_FILE = re.compile(r"([0-9]{20})\.snapshot")


class CorruptSnapshotError(ValueError):
    """A snapshot file that does not parse or fails its CRC."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    return snapshot_offsets(os.listdir(directory))


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """Offsets of the snapshot files among the file `names` of a directory, ascending."""
    found = (SNAPSHOT_FILE.fullmatch(name) for name in names)
    return sorted(int(m.group(1)) for m in found if m)


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        last = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(
            e.producer_id, e.producer_epoch, last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else NO_OFFSET, last.offset_delta if last else 0,
            e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset)
        count += 1
    out = bytearray(_HEADER.pack(VERSION, 0, count)) + body
    struct.pack_into(">I", out, 2, crc32c(memoryview(out)[_CRC_FROM:]))
    return bytes(out)


def decode(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot; CorruptSnapshotError if it is damaged."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc, count = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(data)} bytes do not hold {count} entries")
    entries = []
    for (pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch,
         txn_first) in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size:]):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                                   last_timestamp=timestamp, current_txn_first_offset=txn_first)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
        entries.append(entry)
    return entries


def write(directory: str, offset: int, entries: Iterable[ProducerStateEntry],
          fs: FileSystem, *, sync: bool = True) -> None:
    """Write the snapshot at `offset` (atomically: temporary file, fsync, rename)."""
    path = os.path.join(directory, snapshot_file_name(offset))
    tmp = path + ".tmp"
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write_fully(fd, [encode(entries)], 0)
        if sync:
            fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)


def read(directory: str, offset: int) -> list[ProducerStateEntry]:
    with open(os.path.join(directory, snapshot_file_name(offset)), "rb") as f:
        return decode(f.read())


def delete(directory: str, offset: int, fs: FileSystem) -> None:
    path = os.path.join(directory, snapshot_file_name(offset))
    if os.path.exists(path):
        fs.remove(path)
