"""Finishing or rolling back a segment swap that a crash interrupted (the first three passes of
Kafka's LogLoader).

Log compaction writes a cleaned segment as `*.cleaned` files, renames them to `*.swap`, renames
the segments it replaces to `.deleted`, then renames the `*.swap` files to their final names
(see `LocalLog.replace_segments`). On open, before segments are loaded:

1. Roll back an incomplete swap: while any `.cleaned` file remains, the `.swap` files at or
   above its base offset belong to a swap that was not fully prepared; both are removed and
   the old segments, still in place, stay the log.
2. Complete a prepared swap: a `.swap` log file covers the offsets from its base offset (where
   the first segment it replaces starts) to the end of its last batch; any other segment file
   based inside that range is an old segment the swap replaces and is removed (it may not have
   been renamed to `.deleted` yet).
3. Rename every remaining `.swap` file to its final name, the `.log` first.

Each step only removes or renames files, so running it again after a crash inside it is safe.
"""

from __future__ import annotations

import logging
import mmap
import os
import re

from spark_log.records.batch_header import iter_headers
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.segment_files import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX

log = logging.getLogger(__name__)

_FILE = re.compile(r"([0-9]{20})(\.log|\.index|\.timeindex|\.txnindex)(\.cleaned|\.swap)?")


def recover_interrupted_swaps(directory: str, names: list[str], fs: FileSystem) -> bool:
    """Apply the module's three steps to `directory`, whose listing is `names`; returns whether
    any file was removed or renamed (the caller then lists the directory again)."""
    parsed = {n: m for n in names if (m := _FILE.fullmatch(n))}
    cleaned = [n for n, m in parsed.items() if m.group(3) == CLEANED_SUFFIX]
    swaps = [n for n, m in parsed.items() if m.group(3) == SWAP_SUFFIX]
    if not cleaned and not swaps:
        return False
    min_cleaned = min((_base(parsed[n]) for n in cleaned), default=None)
    valid = []
    for name in swaps:
        if min_cleaned is not None and _base(parsed[name]) >= min_cleaned:
            log.info("Removing %s: its swap was not fully prepared", name)
            fs.remove(os.path.join(directory, name))
        else:
            valid.append(name)
    for name in cleaned:
        log.info("Removing leftover cleaned file %s", os.path.join(directory, name))
        fs.remove(os.path.join(directory, name))
    _remove_replaced(directory, parsed, valid, fs)
    for name in sorted(valid, key=lambda n: (_base(parsed[n]), parsed[n].group(2) != LOG_SUFFIX)):
        log.info("Completing the interrupted swap of %s", os.path.join(directory, name))
        fs.rename(os.path.join(directory, name),
                  os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
    fs.fsync_dir(directory)
    return True


def _remove_replaced(directory: str, parsed: dict[str, re.Match[str]], swaps: list[str],
                     fs: FileSystem) -> None:
    """Remove the old segment files inside the range the swap `.log` files cover."""
    ranges = [(base, max(base + 1, _next_offset(os.path.join(directory, n), base)))
              for n in swaps if parsed[n].group(2) == LOG_SUFFIX
              for base in (_base(parsed[n]),)]
    if not ranges:
        return
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    for name, m in parsed.items():
        if m.group(3) is None and low <= _base(m) < high:
            log.info("Removing %s, replaced by a cleaned segment", name)
            fs.remove(os.path.join(directory, name))


def _next_offset(path: str, base_offset: int) -> int:
    """The offset after the last whole batch of a log file (its base offset if it has none)."""
    next_offset = base_offset
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return next_offset
        with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as mm:
            try:
                for _, header in iter_headers(mm):
                    next_offset = header.next_offset
            except CorruptRecordError:
                pass  # a swap file is fsynced before its rename; keep what is whole
    return next_offset


def _base(match: re.Match[str]) -> int:
    return int(match.group(1))
