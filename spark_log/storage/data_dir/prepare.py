"""The data directory itself (`log.dirs`): created if missing and checked before any use.

As Kafka validates its log directories at start, the broker refuses a path that is not a
directory, cannot be created, or cannot be read and written, with one sentence naming the path
(a `ConfigError`), before it locks, reads or writes anything in it.
"""

from __future__ import annotations

import os
from pathlib import Path

from spark_log.properties import ConfigError


def prepare_data_dir(data_dir: Path) -> None:
    """Create `data_dir` (and its parents) if missing; ConfigError unless it is then a
    directory this process can list, read and write."""
    try:
        is_other_file = data_dir.exists() and not data_dir.is_dir()
        if not is_other_file:
            data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a parent that is a file, or one this process may not enter
        raise ConfigError(f"cannot create data directory {data_dir}: {_reason(e)}") from None
    if is_other_file:
        raise ConfigError(f"data directory {data_dir} is not a directory: a file of that name "
                          "exists")
    if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigError(f"data directory {data_dir} is not readable and writable by this "
                          "process")


def _reason(error: OSError) -> str:
    """The cause in words; a parent that is a file says which one."""
    if isinstance(error, (FileExistsError, NotADirectoryError)):
        return f"{_first_non_directory(Path(error.filename or ''))} is not a directory"
    return error.strerror or str(error)


def _first_non_directory(path: Path) -> Path:
    """The nearest existing ancestor-or-self of `path` that is not a directory."""
    for candidate in (*reversed(path.parents), path):
        if os.path.exists(candidate) and not os.path.isdir(candidate):
            return candidate
    return path
