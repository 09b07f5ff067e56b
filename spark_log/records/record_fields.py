"""Where each field of each record of some v2 records sections lies, in one native call when
the extension is built: what a reader needs to decode a whole fetch into columns.

`record_fields(buf, sections, out)`, for `sections` a list of (lo, hi, count) — the records
section buf[lo:hi] of a batch of `count` records — fills `out`, a writable C-contiguous buffer
of len(FIELDS) x (the counts' sum) int64s (a numpy array, say), with len(FIELDS) columns of one
value per record of all sections in order, column after column in the order of FIELDS
(positions are indexes into `buf`; a negative length is a null key or value), and returns
whether any record has headers, whose bytes are left to the caller. CorruptRecordError unless
each section holds exactly its records, every field inside its record, and each record
without headers ends right after its header count; ValueError if `out` has another size.

Without the extension `record_fields` is None, and the caller's own walk (numpy, in
`spark_log.datasource.columnar`, which defines the behaviour) does it all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["FIELDS", "NATIVE", "record_fields"]

FIELDS = ("ts_delta", "offset_delta", "key_start", "key_len", "value_start", "value_len",
          "headers_start", "header_count", "record_end")

Section = tuple[int, int, int]
Buffer = bytes | bytearray | memoryview
RecordFields = Callable[[Buffer, Sequence[Section], Any], bool]

try:  # by name: import-linter reads only Python sources and would misplace the compiled module
    record_fields: RecordFields | None = importlib.import_module(
        f"{__package__}._native_scan").record_fields
except (ImportError, AttributeError):  # not built: no compiler where it was installed
    record_fields = None

NATIVE = record_fields is not None
