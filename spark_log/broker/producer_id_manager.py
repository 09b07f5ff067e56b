"""Producer ids: unique for the life of a data directory, never reused across restarts.

Ids are handed out from blocks (Kafka's controller allocates blocks of 1000 the same way). The
end of the current block is written to `<data-dir>/producer-id-block` (atomically, fsynced)
before any id from it is used, so after a crash the next start begins past every id that may
have been given out.
"""

from __future__ import annotations

from pathlib import Path

from .topic_metadata import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdManager:
    """Invariant: every id returned is below the persisted block end and above every id
    returned before, in this or an earlier process. Event-loop thread only."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._next = self._read_block_end()
        self._block_end = self._next

    def _read_block_end(self) -> int:
        try:
            return int(self._path.read_text().strip())
        except FileNotFoundError:
            return 0

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomically(self._path, f"{self._block_end}\n".encode())
        producer_id = self._next
        self._next += 1
        return producer_id
