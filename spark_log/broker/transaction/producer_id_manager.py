"""Producer ids: unique for the life of a data directory, never reused across restarts.

Ids are handed out from blocks (Kafka's controller allocates blocks of 1000 the same way). The
end of the current block is written to `<data-dir>/producer-id-block` (storage's
`data_dir.producer_id_block`) before any id from it is used, so after a crash the next start
begins past every id that may have been given out; a damaged file stops the start with a
`ConfigError`.
"""

from __future__ import annotations

from pathlib import Path

from spark_log.storage.data_dir.producer_id_block import (
    BLOCK_SIZE,
    FILE_NAME,
    read_block_end,
    write_block_end,
)


class ProducerIdManager:
    """Invariant: every id returned is below the persisted block end and above every id
    returned before, in this or an earlier process. Event-loop thread only."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._next = read_block_end(self._path)
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_block_end(self._path, self._block_end)
        producer_id = self._next
        self._next += 1
        return producer_id
