"""What the damaged-files tests need: the layout of a partition directory (segments and their
batches, read from the files), the kinds of damage done to them, and a consumer that reads a
topic whole.

A damage function changes files of a stopped broker and returns the first offset whose record
may be lost (None when nothing may be: indexes, snapshots and checkpoints are rebuilt).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from spark_log.records.batch_header import BatchHeader, iter_headers
from tests.storage.batches import flip_byte


@dataclass
class SegmentFiles:
    base: int
    log: Path
    batches: list[tuple[int, BatchHeader]]  # (position, header)

    def file(self, suffix: str) -> Path:
        return self.log.with_suffix(suffix)


def layout(partition_dir: Path) -> list[SegmentFiles]:
    """The segments of a partition directory, oldest first, with their batches."""
    out = []
    for path in sorted(partition_dir.glob("[0-9]" * 20 + ".log")):
        data = path.read_bytes()
        out.append(SegmentFiles(int(path.name[:20]), path, list(iter_headers(data))))
    return out


def cut_at(batches: list[tuple[int, BatchHeader]], position: int) -> int:
    """The first offset lost when a segment is cut at byte `position`: that of the first batch
    not wholly before it."""
    for pos, header in batches:
        if pos + header.size > position:
            return header.base_offset
    raise AssertionError(f"no batch reaches byte {position}")


Damage = Callable[[Path, random.Random], int | None]


def middle(segments: list[SegmentFiles]) -> SegmentFiles:
    assert len(segments) >= 3, f"need three segments, have {len(segments)}"
    return segments[len(segments) // 2]


# ---- .log ---------------------------------------------------------------------------------

def garbage_tail(d: Path, rng: random.Random) -> int | None:
    with open(layout(d)[-1].log, "ab") as f:
        f.write(b"\x07" + rng.randbytes(299))
    return None


def zeroed_tail(d: Path, rng: random.Random) -> int | None:
    with open(layout(d)[-1].log, "ab") as f:
        f.write(bytes(4096))
    return None


def torn_last_batch(d: Path, rng: random.Random) -> int | None:
    active = layout(d)[-1]
    os.truncate(active.log, active.log.stat().st_size - 7)
    return active.batches[-1][1].base_offset


def truncated_active_anywhere(d: Path, rng: random.Random) -> int | None:
    active = layout(d)[-1]
    position = rng.randrange(1, active.log.stat().st_size)
    os.truncate(active.log, position)
    return cut_at(active.batches, position)


def truncated_middle_anywhere(d: Path, rng: random.Random) -> int | None:
    """The middle segment cut inside one of its batches. Not between two: that leaves a
    well-formed shorter segment, which, once recovery after a SIGKILL has rebuilt its indexes,
    is a log with an offset gap (compaction leaves gaps legitimately), so nothing marks the
    damage and the segments after it are served."""
    segment = middle(layout(d))
    between = {pos + header.size for pos, header in segment.batches}
    size = segment.log.stat().st_size
    position = rng.randrange(1, size)
    while position in between:
        position = rng.randrange(1, size)
    os.truncate(segment.log, position)
    return cut_at(segment.batches, position)


def bad_crc_in_the_middle(d: Path, rng: random.Random) -> int | None:
    segment = middle(layout(d))
    pos, header = segment.batches[len(segment.batches) // 2]
    flip_byte(segment.log, pos + 61 + rng.randrange(header.size - 61))  # a record, not the header
    return header.base_offset


def base_offset_above_first_batch(d: Path, rng: random.Random) -> int | None:
    segment = middle(layout(d))
    renamed = f"{segment.base + 1:020d}"
    for suffix in (".log", ".index", ".timeindex"):
        if segment.file(suffix).exists():
            segment.file(suffix).rename(segment.log.with_name(renamed + suffix))
    return segment.base


# ---- indexes, snapshots, checkpoints ------------------------------------------------------

def _index_damage(suffix: str, how: str) -> Damage:
    def damage(d: Path, rng: random.Random) -> int | None:
        for segment in (middle(layout(d)), layout(d)[-1]):
            path = segment.file(suffix)
            size = path.stat().st_size
            if how == "garbage":
                with open(path, "ab") as f:
                    f.write(rng.randbytes(5))
            elif how == "zeroed":
                path.write_bytes(bytes(size))
            elif how == "truncated":
                os.truncate(path, rng.randrange(size + 1))
            elif how == "deleted":
                path.unlink()
            elif how == "wrong-entry" and size >= 16:
                flip_byte(path, 8 + 7)  # the second entry's position, low byte
        return None
    damage.__name__ = f"{suffix[1:]}_{how}"
    return damage


def txn_index_damage(d: Path, rng: random.Random) -> int | None:
    indexes = sorted(d.glob("*.txnindex"))
    assert indexes, "no transaction index to damage"
    with open(indexes[len(indexes) // 2], "ab") as f:
        f.write(b"\x00\x00" + rng.randbytes(20))
    return None


def snapshot_damage(how: str) -> Damage:
    def damage(d: Path, rng: random.Random) -> int | None:
        snapshots = sorted(d.glob("*.snapshot"))
        assert snapshots, "no producer snapshot to damage"
        for path in snapshots:
            if how == "garbage":
                path.write_bytes(rng.randbytes(path.stat().st_size or 40))
            elif how == "truncated":
                os.truncate(path, path.stat().st_size // 2)
            else:
                path.unlink()
        return None
    damage.__name__ = f"snapshot_{how}"
    return damage


def leader_epoch_checkpoint_garbage(d: Path, rng: random.Random) -> int | None:
    (d / "leader-epoch-checkpoint").write_bytes(b"0\n1\n" + rng.randbytes(12))
    return None


# ---- reading ------------------------------------------------------------------------------

def read_all(bootstrap: str, topic: str, *, committed: bool = True, timeout_s: float = 30.0
             ) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0 up to its end, as a consumer sees them;
    raises if the partition answers an error or the end is not reached in time."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise RuntimeError(f"{topic}: {msg.error()}")
            out.append((msg.offset(), msg.value()))
        raise TimeoutError(f"{topic}: the end was not reached in {timeout_s}s ({len(out)} read)")
    finally:
        consumer.close()
