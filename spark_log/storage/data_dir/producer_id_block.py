"""`producer-id-block`: the end of the last block of producer ids a broker handed out.

Written (atomically, fsynced) before any id of a new block is used, so after a crash the next
start begins past every id that may have been given out. A file that is there but does not hold
such a number is a `ConfigError` naming the file, the fault and what to do: no other file
records every id handed out (an idempotent producer that has not written yet leaves no trace),
so any guess could hand an id out twice; the operator restores the file or writes a number known
to be large enough. The broker's `ProducerIdManager` and `spark-log dump-log --verify` read it
with the same reader.
"""

from __future__ import annotations

from pathlib import Path

from spark_log.properties import ConfigError
from spark_log.storage.data_dir.atomic_file import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
MAX_BLOCK_END = (1 << 63) - 1 - BLOCK_SIZE  # ids are int64: room for one more block
_MAX_DIGITS = len(str(MAX_BLOCK_END))
_WHAT_TO_DO = ("a producer id must never be handed out twice and no other file tells which were, "
               "so restore the file, or write into it a number above every producer id this "
               "broker has handed out (a larger number is always safe)")


def write_block_end(path: Path, block_end: int) -> None:
    """Record `block_end` durably before any id below it is handed out."""
    write_atomically(path, f"{block_end}\n".encode())


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
