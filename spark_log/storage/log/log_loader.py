"""Opening a partition directory: find its segments, clean leftovers, recover after a crash
(Kafka's LogLoader).

Opening is cheap by design: files are listed and stat-ed, indexes stay closed. Work is done
only where needed:
* a segment swap of log compaction that a crash interrupted is rolled back or completed
  (`swap_recovery`);
* leftovers of interrupted operations (`*.deleted`, `*.tmp`) and index files without a .log
  are removed;
* an index that is missing or whose size is not a whole number of entries is rebuilt; a
  damaged transaction index is rebuilt by recovering from its segment on (the aborted
  transactions are learnt again from the log);
* after a clean shutdown the active segment, whose tail must be read for the log end offset
  anyway, gets a cheap check (`Segment.check_tail`: its first batch, and its batches after the
  last index entry); if it fails, the segment is recovered as after a crash. The clean-shutdown
  marker only says which segments may skip the full walk: whatever start-up does not check is
  checked by the first read that reaches it (`batch_check`);
* after an unclean shutdown, every segment from the one holding the recovery point on is
  recovered: each batch's size, magic, CRC and offsets are checked and indexes are rebuilt.
  At the first invalid batch the log is cut, and every later segment goes with it, since the
  log must stay contiguous. One WARNING names the file, the byte, the reason, the offsets and
  the bytes dropped. A torn write is just dropped; anything that still holds data — a whole
  batch that failed its check, later segments — is kept beside the log as
  `<base offset>.damaged-<time>.log` (ignored by the broker, readable by `spark-log dump-log`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from spark_log.clock import Clock
from spark_log.records.batch_header import BatchHeader
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.index.transaction_index import TXN_INDEX_SUFFIX
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.segment import Segment
from spark_log.storage.log.segment_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    damaged_file_name,
    offset_named,
)
from spark_log.storage.log.segment_recovery import Damage
from spark_log.storage.log.swap_recovery import recover_interrupted_swaps
from spark_log.storage.producer_state.producer_snapshot import SNAPSHOT_SUFFIX

log = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp")
_UNFINISHED_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX, *_LEFTOVER_SUFFIXES)
# The names `_Listing` sorts out: a segment's files (SEGMENT_FILE's), and producer snapshots.
_FILE = offset_named(*SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX)


@dataclass
class LoadedLog:
    segments: list[Segment]
    next_offset: int | None  # known when start-up read the active segment's tail
    recovered: bool
    recovered_from: int | None = None  # base offset of the first segment recovery walked
    # The producer snapshots' offsets, from the same listing of the directory; None: not
    # listed, so the producer state lists the directory itself.
    snapshots: list[int] | None = None


def load_segments(directory: str, config: LogConfig, *, clock: Clock, fs: FileSystem,
                  recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
                  on_batch: Callable[[BatchHeader], None]) -> LoadedLog:
    """The segments of `directory`, recovered as the module docstring says."""
    names = os.listdir(directory)
    listing = _Listing(names)
    removed = False
    if listing.unfinished:  # rare: an interrupted swap, deletion or write to finish first
        if recover_interrupted_swaps(directory, names, fs):
            names = os.listdir(directory)
        removed = _remove_leftovers(directory, names, fs)
        listing = _Listing(names)
    bases = listing.bases
    for base, name in listing.index_files:
        if base not in bases:
            log.warning("Deleting index file %s, which has no log file", name)
            fs.remove(os.path.join(directory, name))
            removed = True
    segments = [Segment(directory, b, config, clock=clock, fs=fs) for b in sorted(bases)]
    created = not segments
    if created:
        segments = [Segment(directory, log_start_offset, config, clock=clock, fs=fs,
                            create=True)]
    if removed or created:
        fs.fsync_dir(directory)
    first_unflushed = _first_to_recover(segments, recovery_point, had_clean_shutdown)
    first_unflushed, next_offset = _check_unrecovered(segments, first_unflushed,
                                                      listing.txn_indexed)
    recovered_from = None
    if first_unflushed < len(segments):
        # The active segment's indexes are rebuilt writable, as they stay: trimming them and
        # preallocating them again cost a dozen file operations per partition after a crash.
        segments[-1].set_active(True)
        segments, recovered_from, next_offset = _recover(directory, segments, first_unflushed,
                                                         clock, fs, on_batch)
    # (A no-op for indexes never loaded. A rebuilt active index keeps its few entries in memory,
    # without a map or a descriptor, as it would after its first append.)
    for segment in segments if recovered_from is None else segments[:-1]:
        segment.close_indexes()
    segments[-1].set_active(True)
    return LoadedLog(segments, next_offset, recovered_from is not None, recovered_from,
                     sorted(listing.snapshots))


class _Listing:
    """A partition directory's file names, sorted out in one pass: one regular expression per
    name, since a start opens every partition."""

    __slots__ = ("bases", "index_files", "snapshots", "txn_indexed", "unfinished")

    def __init__(self, names: list[str]) -> None:
        self.bases: set[int] = set()  # of the .log files
        self.index_files: list[tuple[int, str]] = []
        self.txn_indexed: set[int] = set()  # bases with a transaction index (most have none)
        self.snapshots: list[int] = []  # the producer snapshots' offsets
        # A name left by an interrupted operation (a swap, a deletion, a write) to finish first.
        self.unfinished = False
        for name in names:
            m = _FILE.fullmatch(name)
            if m is None:
                self.unfinished = self.unfinished or name.endswith(_UNFINISHED_SUFFIXES)
                continue
            digits, suffix = m.groups()
            if suffix == LOG_SUFFIX:
                self.bases.add(int(digits))
            elif suffix == SNAPSHOT_SUFFIX:
                self.snapshots.append(int(digits))
            else:
                self.index_files.append((int(digits), name))
                if suffix == TXN_INDEX_SUFFIX:
                    self.txn_indexed.add(int(digits))


def _first_to_recover(segments: list[Segment], recovery_point: int, clean: bool) -> int:
    """Index of the first segment to recover: the one holding the recovery point."""
    if clean:
        return len(segments)
    i = 0
    while i + 1 < len(segments) and segments[i + 1].base_offset <= recovery_point:
        i += 1
    return i


def _check_unrecovered(segments: list[Segment], first_unflushed: int, txn_indexed: set[int]
                       ) -> tuple[int, int | None]:
    """Repair torn or missing indexes before `first_unflushed` (a damaged transaction index
    means recovering from its segment on), and check the active segment's tail if recovery will
    not walk it. Returns the index of the first segment to recover, and the log end offset when
    the check found it."""
    for i, segment in enumerate(segments[:first_unflushed]):
        problem = segment.index_problem()
        if problem:
            log.warning("%s; rebuilding the indexes of %s", problem, segment.log.path)
            segment.rebuild_indexes()
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        problem = segment.txn_index.problem(segment.base_offset, following) \
            if segment.base_offset in txn_indexed else None
        if problem:  # aborted transactions come from the log: replay it from there
            log.warning("%s; recovering from that segment on to rebuild it", problem)
            return i, None
    if first_unflushed < len(segments):
        return first_unflushed, None
    found = segments[-1].check_tail()
    if isinstance(found, str):
        log.warning("%s; recovering the segment", found)
        return len(segments) - 1, None
    return first_unflushed, found


def _recover(directory: str, segments: list[Segment], start: int, clock: Clock, fs: FileSystem,
             on_batch: Callable[[BatchHeader], None]) -> tuple[list[Segment], int, int]:
    """Recover segments from `start` on; returns those left, the base offset of the first one
    recovered, and the log end offset (the last segment is always the last one recovered)."""
    i = first = start
    while i < len(segments):
        segment = segments[i]
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        next_offset, damage = segment.recover(on_batch, following)
        if damage is None:
            i += 1
            continue
        _drop_from(directory, segment, damage, segments[i + 1:], clock, fs)
        segments = segments[: i + 1]
        if segment.size > 0 or i == 0:
            break
        # Nothing is left of it but a base offset that may lie past the real end of the log,
        # where consumers would wait for offsets that never come: the segment before it is the
        # log's end now, and is recovered in turn.
        log.warning("Removing %s, left empty", segment.log.path)
        segment.delete_files()
        fs.fsync_dir(directory)
        segments.pop()
        i -= 1
        first = min(first, i)
    return segments, segments[first].base_offset, next_offset


def _drop_from(directory: str, segment: Segment, damage: Damage, later: list[Segment],
               clock: Clock, fs: FileSystem) -> None:
    """Cut the log at `damage` in `segment`, removing the `later` segments; keep what still
    holds data aside; one WARNING says what went."""
    first_dropped = min(damage.next_offset, damage.first_offset or damage.next_offset)
    now = clock.now_ms()
    keep = damage.whole_batch and segment.size > damage.position
    kept = [os.path.join(directory, damaged_file_name(segment.base_offset, now))] if keep else []
    cut = segment.cut(damage.position, kept[0] if kept else None)
    last_dropped = damage.last_offset
    later_bytes = 0
    for doomed in later:
        last_dropped = max(last_dropped or -1, doomed.last_offset_readable())
        later_bytes += doomed.size
        kept.append(os.path.join(directory, damaged_file_name(doomed.base_offset, now)))
        doomed.keep_log_as(kept[-1])
    fs.fsync_dir(directory)
    offsets = f"offsets {first_dropped} to {last_dropped}" if last_dropped is not None and \
        last_dropped >= first_dropped else f"anything from offset {first_dropped} on"
    later_text = f", and {len(later)} later segment(s) of {later_bytes} bytes" if later else ""
    where = f"kept in {', '.join(os.path.basename(k) for k in kept)}" if kept else \
        "nothing kept (a torn write, not a batch)"
    log.warning("%s is damaged at byte %d (%s): dropped %s (%d bytes%s); %s", segment.log.path,
                damage.position, damage.reason, offsets, cut, later_text, where)


def _remove_leftovers(directory: str, names: list[str], fs: FileSystem) -> bool:
    leftovers = [n for n in names if n.endswith(_LEFTOVER_SUFFIXES)]
    for name in leftovers:
        log.info("Removing leftover file %s", os.path.join(directory, name))
        fs.remove(os.path.join(directory, name))
    names[:] = [n for n in names if n not in leftovers]
    return bool(leftovers)

