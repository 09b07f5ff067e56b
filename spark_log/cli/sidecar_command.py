"""`spark-log sidecar status|start|stop`: the embedded broker of a data directory (see
`spark_log.sidecar`). `status` only looks (it never starts a broker) and exits 3 when none runs,
as LSB init scripts report "not running"; `start` is idempotent; `stop` shuts the broker down
cleanly (SIGTERM) and waits for it. `sidecar_errors` turns the sidecar's failures into one
error line, for these commands and for every tool that starts the sidecar.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_log import sidecar

from .errors import CliError
from .output import print_json, print_key_values

EXIT_NOT_RUNNING = 3
_LOG_LINE_DECOR = re.compile(r"^\[[^\]]*\]\s*|\s*\([\w.]+\)$")  # [time] ... (logger)


@contextmanager
def sidecar_errors(data_dir: Path | None) -> Iterator[None]:
    """Failures of the sidecar as one CliError line: a broker that would not start is named
    with the last line of its log (the whole log is in the data directory), a data directory
    that cannot be used with the reason."""
    try:
        yield
    except sidecar.SidecarError as exc:
        raise CliError(_one_line(str(exc), data_dir)) from None
    except OSError as exc:
        raise CliError(f"data directory {sidecar.resolve_data_dir(data_dir)}: "
                       f"{exc.strerror or exc}") from None


def _one_line(message: str, data_dir: Path | None) -> str:
    head, _, log_tail = message.partition("\n")
    lines = [line for line in log_tail.splitlines() if line.strip()]
    if not lines:
        return head.rstrip(":")
    last = _LOG_LINE_DECOR.sub("", lines[-1])
    log_file = sidecar.resolve_data_dir(data_dir) / sidecar.LOG_FILE
    return f"{head.rstrip(':')}: {last} (its log: {log_file})"


def add_sidecar_parser(commands: Any) -> None:
    p = commands.add_parser("sidecar", help="status, start and stop of the embedded broker",
                            description="The embedded sidecar broker of a data directory.")
    actions = p.add_subparsers(dest="sidecar_command", metavar="ACTION", required=True)
    for name, run, text in (("status", _status, "is a sidecar broker running, and where"),
                            ("start", _start, "start the sidecar broker unless it runs"),
                            ("stop", _stop, "stop the sidecar broker")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--data-dir", type=Path, default=None,
                            help="its data directory (default $SPARK_LOG_DATA_DIR or "
                                 "~/.spark_log/data)")
        action.add_argument("--json", action="store_true")
        action.set_defaults(run=run)


def _describe(current: sidecar.SidecarStatus) -> dict[str, Any]:
    return {"running": current.running, "pid": current.pid, "address": current.address,
            "data_dir": str(current.data_dir),
            "log_file": str(current.log_file) if current.log_file else None}


def _show(current: sidecar.SidecarStatus, as_json: bool) -> None:
    info = _describe(current)
    if as_json:
        print_json(info)
        return
    print_key_values([("Status", "running" if current.running else "not running"),
                      ("Address", info["address"]), ("PID", info["pid"]),
                      ("Data dir", info["data_dir"]), ("Log file", info["log_file"])])


def _status(args: argparse.Namespace) -> int:
    with sidecar_errors(args.data_dir):
        current = sidecar.status(args.data_dir)
    _show(current, args.json)
    return 0 if current.running else EXIT_NOT_RUNNING


def _start(args: argparse.Namespace) -> int:
    with sidecar_errors(args.data_dir):
        sidecar.ensure_running(args.data_dir)
        current = sidecar.status(args.data_dir)
    _show(current, args.json)
    return 0


def _stop(args: argparse.Namespace) -> int:
    with sidecar_errors(args.data_dir):
        current = sidecar.status(args.data_dir)
        stopped = sidecar.stop(args.data_dir)
    if args.json:
        print_json({"stopped": stopped, "pid": current.pid, "data_dir": str(current.data_dir)})
    elif stopped:
        print(f"Stopped the sidecar broker (pid {current.pid}) of {current.data_dir}.")
    else:
        print(f"No sidecar broker is running for {current.data_dir}.")
    return 0
