"""Opening a partition directory: find its segments, clean leftovers, recover after a crash
(Kafka's LogLoader).

Opening is cheap by design: files are listed and stat-ed, indexes stay closed. Work is done
only where needed:
* a segment swap of log compaction that a crash interrupted is rolled back or completed
  (`swap_recovery`);
* leftovers of interrupted operations (`*.deleted`, `*.tmp`) and index files without a .log
  are removed;
* an index that is missing or whose size is not a whole number of entries is rebuilt;
* after an unclean shutdown, every segment from the one holding the recovery point on is
  recovered: each batch's size, magic, CRC and offsets are checked, a torn or garbage tail is
  truncated (WARNING naming the file and the bytes cut), indexes are rebuilt, and any later
  segment is deleted, since the log must stay contiguous.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from spark_log.records.batch_header import BatchHeader

from ..clock import Clock
from .filesystem import FileSystem
from .log_config import LogConfig
from .segment import DELETED_SUFFIX, LOG_SUFFIX, Segment
from .swap_recovery import recover_interrupted_swaps

log = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"([0-9]{20})(\.log|\.index|\.timeindex|\.txnindex)")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp")


@dataclass
class LoadedLog:
    segments: list[Segment]
    next_offset: int | None  # known when recovery walked the last segment
    recovered: bool
    recovered_from: int | None = None  # base offset of the first segment recovery walked


def load_segments(directory: str, config: LogConfig, *, clock: Clock, fs: FileSystem,
                  recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
                  on_batch: Callable[[BatchHeader], None]) -> LoadedLog:
    """The segments of `directory`, recovered as the module docstring says."""
    names = os.listdir(directory)
    if recover_interrupted_swaps(directory, names, fs):
        names = os.listdir(directory)
    removed = _remove_leftovers(directory, names, fs)
    bases: set[int] = set()
    index_files: list[tuple[int, str]] = []
    for name in names:
        m = _SEGMENT_FILE.fullmatch(name)
        if m and m.group(2) == LOG_SUFFIX:
            bases.add(int(m.group(1)))
        elif m:
            index_files.append((int(m.group(1)), name))
    for base, name in index_files:
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
    for segment in segments[:first_unflushed]:
        problem = segment.index_problem()
        if problem:
            log.warning("%s; rebuilding the indexes of %s", problem, segment.log.path)
            segment.rebuild_indexes()
    next_offset = None
    if first_unflushed < len(segments):
        segments, next_offset = _recover(directory, segments, first_unflushed, fs, on_batch)
    segments[-1].set_active(True)
    recovered = first_unflushed < len(segments)
    return LoadedLog(segments, next_offset, recovered,
                     segments[first_unflushed].base_offset if recovered else None)


def _first_to_recover(segments: list[Segment], recovery_point: int, clean: bool) -> int:
    """Index of the first segment to recover: the one holding the recovery point."""
    if clean:
        return len(segments)
    i = 0
    while i + 1 < len(segments) and segments[i + 1].base_offset <= recovery_point:
        i += 1
    return i


def _recover(directory: str, segments: list[Segment], start: int, fs: FileSystem,
             on_batch: Callable[[BatchHeader], None]) -> tuple[list[Segment], int]:
    for i in range(start, len(segments)):
        segment = segments[i]
        truncated = segment.recover(on_batch)
        if truncated:
            log.warning("Truncated %d bytes of invalid data at the end of %s during recovery",
                        truncated, segment.log.path)
            for later in segments[i + 1:]:
                log.warning("Deleting %s, which follows the corruption in %s",
                            later.log.path, segment.log.path)
                later.delete_files()
            segments = segments[: i + 1]
            fs.fsync_dir(directory)
            break
    last = segments[-1]
    return segments, last.read_next_offset()


def _remove_leftovers(directory: str, names: list[str], fs: FileSystem) -> bool:
    leftovers = [n for n in names if n.endswith(_LEFTOVER_SUFFIXES)]
    for name in leftovers:
        log.info("Removing leftover file %s", os.path.join(directory, name))
        fs.remove(os.path.join(directory, name))
    names[:] = [n for n in names if n not in leftovers]
    return bool(leftovers)

