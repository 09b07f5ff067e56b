"""The names of a segment's files: the base offset as 20 digits and a suffix (`.log`, `.index`,
`.timeindex`, `.txnindex`), the suffixes a file takes while it is deleted or swapped in after
cleaning, and the name recovery gives the bytes it cut. Storage's public patterns: the loader,
the cleaner and `spark-log dump-log --verify` recognise files by them.
"""

from __future__ import annotations

import re

from spark_log.storage.index.transaction_index import TXN_INDEX_SUFFIX

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX, SWAP_SUFFIX = ".cleaned", ".swap"  # a cleaned segment before and during its swap


SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def offset_named(*suffixes: str) -> re.Pattern[str]:
    """Names of a base offset as 20 digits and one of `suffixes` (groups: offset, suffix)."""
    return re.compile("([0-9]{20})(" + "|".join(map(re.escape, suffixes)) + ")")


SEGMENT_FILE = offset_named(*SEGMENT_SUFFIXES)  # a segment's files
DAMAGED_FILE = re.compile(r"[0-9]{20}\.damaged-[0-9]+\.log")  # see damaged_file_name


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def damaged_file_name(base_offset: int, now_ms: int) -> str:
    """Where recovery keeps bytes it cut that still hold whole batches: not a segment name (the
    loader ignores it), but a .log that `spark-log dump-log` reads."""
    return f"{base_offset:020d}.damaged-{now_ms}.log"
