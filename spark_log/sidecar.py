"""The embedded sidecar broker: one detached broker process per data directory, shared by every
Spark job (and any Kafka client) on the machine that uses that directory.

The data directory is, in order: the argument (the pylog option `dataDir`), the environment
variable SPARK_LOG_DATA_DIR, or ~/.spark_log/data. A running broker writes `broker.json`
({pid, host, port}) into it once it listens and removes it on a clean stop; `find` trusts that
file only while its pid is alive. `ensure_running` starts a broker when none runs: detached
(`start_new_session`), on the loopback port it had last time (`sidecar.port`) or else a free
one, its output appended to `sidecar.log` in the data directory, under an exclusive lock on
`sidecar.lock`, so that processes starting at the same time end up with one broker. Files
left by a broker that died are removed first.

API for the CLI: `find(data_dir)`, `ensure_running(data_dir) -> "host:port"`,
`status(data_dir) -> SidecarStatus`, `stop(data_dir) -> bool`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ENV_DATA_DIR = "SPARK_LOG_DATA_DIR"
INFO_FILE = "broker.json"
LOCK_FILE = "sidecar.lock"
LOG_FILE = "sidecar.log"
PORT_FILE = "sidecar.port"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class SidecarError(RuntimeError):
    """The sidecar broker could not be started (its log's tail is in the message)."""


@dataclass(frozen=True)
class SidecarStatus:
    """What runs for a data directory. `running` implies pid/host/port are set."""

    data_dir: Path
    running: bool
    pid: int | None = None
    host: str | None = None
    port: int | None = None
    log_file: Path | None = None

    @property
    def address(self) -> str | None:
        return f"{self.host}:{self.port}" if self.running else None


def default_data_dir() -> Path:
    return Path.home() / ".spark_log" / "data"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The argument, else $SPARK_LOG_DATA_DIR, else ~/.spark_log/data (absolute)."""
    chosen = data_dir or os.environ.get(ENV_DATA_DIR) or default_data_dir()
    return Path(chosen).expanduser().resolve()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid) and _is_broker(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _is_broker(pid: int) -> bool:
    """Guards against a recycled pid: the process must be a spark_log broker (where /proc
    tells)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    # An exiting process reads as an empty command line (its memory is gone) until it is a
    # zombie: it is still the broker, not yet ended.
    return not cmdline or b"spark_log" in cmdline


def _read_info(data_dir: Path) -> dict | None:
    try:
        info = json.loads((data_dir / INFO_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    # A damaged file names no broker (one that runs rewrites it at its next start).
    usable = isinstance(info, dict) and isinstance(info.get("pid"), int) and \
        isinstance(info.get("host"), str) and isinstance(info.get("port"), int)
    return info if usable else None


def find(data_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The address of the live broker of `data_dir`, or None."""
    return status(data_dir).address


def status(data_dir: str | os.PathLike[str] | None = None) -> SidecarStatus:
    path = resolve_data_dir(data_dir)
    info = _read_info(path)
    log_file = path / LOG_FILE
    if info is None or not _alive(int(info["pid"])):
        return SidecarStatus(path, False, log_file=log_file)
    return SidecarStatus(path, True, int(info["pid"]), str(info["host"]), int(info["port"]),
                         log_file)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_FILE, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def ensure_running(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The address ("host:port") of the broker of `data_dir`, started if none runs."""
    address = find(data_dir)
    if address is not None:
        return address
    path = resolve_data_dir(data_dir)
    with _locked(path):
        current = status(path)
        if current.running:
            return current.address or ""
        _clean_stale(path)
        return _start(path)


def _clean_stale(path: Path) -> None:
    """Remove what a dead broker left behind (its broker.json)."""
    with contextlib.suppress(FileNotFoundError):
        (path / INFO_FILE).unlink()


def _start(path: Path) -> str:
    """Start on the port the last sidecar of `path` had (clients that remember the address keep
    working), or on a free port when that one is taken."""
    previous = _previous_port(path)
    if previous:
        try:
            return _start_on(path, previous)
        except SidecarError:
            pass
    return _start_on(path, 0)


def _previous_port(path: Path) -> int:
    try:
        return int((path / PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return 0


def _start_on(path: Path, port: int) -> str:
    argv = [sys.executable, "-m", "spark_log.broker", "--data-dir", str(path),
            "--host", "127.0.0.1", "--port", str(port)]
    with open(path / LOG_FILE, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True, cwd=str(path))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        info = _read_info(path)
        if info is not None and info.get("pid") == proc.pid:
            (path / PORT_FILE).write_text(str(info["port"]))
            return f"{info['host']}:{info['port']}"
        if proc.poll() is not None:
            raise SidecarError(f"the sidecar broker for {path} exited with {proc.returncode}:\n"
                               f"{_tail(path / LOG_FILE)}")
        time.sleep(0.02)
    raise SidecarError(f"the sidecar broker for {path} did not start within "
                       f"{START_TIMEOUT_S:.0f}s:\n{_tail(path / LOG_FILE)}")


def _tail(log_file: Path, limit: int = 4000) -> str:
    try:
        return log_file.read_text(errors="replace")[-limit:]
    except FileNotFoundError:
        return ""


def stop(data_dir: str | os.PathLike[str] | None = None,
         timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the broker of `data_dir` (SIGTERM: a clean shutdown); False if none was running."""
    current = status(data_dir)
    if not current.running or current.pid is None:
        return False
    os.kill(current.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(current.pid):
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(current.pid, os.WNOHANG)
        time.sleep(0.05)
    raise SidecarError(f"the sidecar broker (pid {current.pid}) did not stop within "
                       f"{timeout_s:.0f}s")
