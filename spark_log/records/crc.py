"""The CRC-32C (Castagnoli) that a v2 record batch carries over its bytes from the attributes
on, and that producer snapshots carry too: one function for the whole package, the C walks
included (`_native_batches.c` calls this one).

`crc32c(data, value=None)`: the checksum of any bytes-like `data` (a memoryview slice is not
copied), continued from the checksum `value` of the bytes before it. It is fastcrc's, whose
carry-less-multiply code checks a 1 MiB batch in about a quarter of the time the crc32c package
takes, and is faster at every size measured (`bench/crc32c_libraries.py`); the crc32c package
stays the tests' independent reference.
"""

from __future__ import annotations

from fastcrc.crc32 import iscsi as crc32c

__all__ = ["crc32c"]
