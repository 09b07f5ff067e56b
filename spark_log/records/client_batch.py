"""A produce request's one batch checked in one native call, when the extension is built.

`check_client_batch(view, max_message_bytes, next_offset, leader_epoch)` reads the header of a
client's batch and checks it as the log validator does before assigning offsets: the header
(`read_header`'s errors), the client rules, the size against max.message.bytes and the CRC
(`verify_crc`'s error). It returns the leader's header for the batch, its offsets from
`next_offset` and its partition leader epoch set, as a `BatchHeader` and the 61 header bytes to
write before the untouched records; or None where the validator's own walk must decide (no
batch, several batches, a broken client rule, a batch too large: errors that name the
partition). Without the extension it always returns None, and the validator's walk, which
defines the behaviour, does it all.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from .batch_header import BatchHeader

__all__ = ["NATIVE", "check_client_batch"]

Checked = tuple[BatchHeader, bytes]


def _none(view: memoryview, max_message_bytes: int, next_offset: int,
          leader_epoch: int) -> Checked | None:
    return None


try:  # by name: import-linter reads only Python sources and would misplace the compiled module
    _native = importlib.import_module(f"{__package__}._native_scan").client_batch
except (ImportError, AttributeError):  # not built: no compiler where it was installed
    _native = None

NATIVE = _native is not None
check_client_batch: Callable[[memoryview, int, int, int], Checked | None] = \
    functools.partial(_native, BatchHeader) if _native is not None else _none
