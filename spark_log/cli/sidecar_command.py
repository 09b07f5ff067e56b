"""`spark-log sidecar status|start|stop`: the embedded broker of a data directory (see
`spark_log.sidecar`). `status` only looks (it never starts a broker) and exits 3 when none runs,
as LSB init scripts report "not running"; `start` is idempotent; `stop` shuts the broker down
cleanly (SIGTERM) and waits for it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from spark_log import sidecar

from .errors import CliError
from .output import print_json, print_key_values

EXIT_NOT_RUNNING = 3


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
    current = sidecar.status(args.data_dir)
    _show(current, args.json)
    return 0 if current.running else EXIT_NOT_RUNNING


def _start(args: argparse.Namespace) -> int:
    try:
        sidecar.ensure_running(args.data_dir)
    except sidecar.SidecarError as exc:
        raise CliError(str(exc)) from None
    _show(sidecar.status(args.data_dir), args.json)
    return 0


def _stop(args: argparse.Namespace) -> int:
    current = sidecar.status(args.data_dir)
    try:
        stopped = sidecar.stop(args.data_dir)
    except sidecar.SidecarError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json({"stopped": stopped, "pid": current.pid, "data_dir": str(current.data_dir)})
    elif stopped:
        print(f"Stopped the sidecar broker (pid {current.pid}) of {current.data_dir}.")
    else:
        print(f"No sidecar broker is running for {current.data_dir}.")
    return 0
