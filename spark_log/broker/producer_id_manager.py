"""Producer ids: unique for the life of a data directory, never reused across restarts.

Ids are handed out from blocks (Kafka's controller allocates blocks of 1000 the same way). The
end of the current block is written to `<data-dir>/producer-id-block` (atomically, fsynced)
before any id from it is used, so after a crash the next start begins past every id that may
have been given out. A file that is there but does not hold such a number stops the start with
a `ConfigError`: no other file records every id handed out (an idempotent producer that has not
written yet leaves no trace), so any guess could hand an id out twice; the operator restores the
file or writes a number known to be large enough.
"""

from __future__ import annotations

from pathlib import Path

from .broker_config import ConfigError
from .topic_metadata import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
MAX_BLOCK_END = (1 << 63) - 1 - BLOCK_SIZE  # ids are int64: room for one more block
_MAX_DIGITS = len(str(MAX_BLOCK_END))
_WHAT_TO_DO = ("a producer id must never be handed out twice and no other file tells which were, "
               "so restore the file, or write into it a number above every producer id this "
               "broker has handed out (a larger number is always safe)")


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
            write_atomically(self._path, f"{self._block_end}\n".encode())
        producer_id = self._next
        self._next += 1
        return producer_id


def read_block_end(path: Path) -> int:
    """The end of the last block handed out, 0 if there is no file (no id handed out yet);
    ConfigError naming the file, the fault and what to do if it does not hold one."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return 0
    except OSError as e:
        raise _damaged(path, f"cannot be read ({e.strerror})") from None
    digits = text.strip()
    if not digits:
        raise _damaged(path, "empty file")
    if not digits.isdigit():  # ASCII digits only: no sign, no spaces inside, no underscores
        shown = text[:40].decode(errors="replace")
        raise _damaged(path, f"{shown!r} is not a non-negative number")
    if len(digits) > _MAX_DIGITS or int(digits) > MAX_BLOCK_END:
        shown = digits.decode() if len(digits) <= _MAX_DIGITS else f"{digits[:20].decode()}..."
        raise _damaged(path, f"{shown} is more than the largest block end 64-bit producer "
                       f"ids allow ({MAX_BLOCK_END})")
    return int(digits)


def _damaged(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {problem}; {_WHAT_TO_DO}")
