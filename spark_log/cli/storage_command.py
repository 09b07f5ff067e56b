"""`spark-log storage random-uuid|format|info`: a node's directories, as `kafka-storage.sh`.

`random-uuid` prints a new cluster id. `format --cluster-id ID` writes meta.properties (the
cluster id, the node id, a directory id) into every log directory and the metadata log
directory of the node the settings describe (the broker's flags: `--config-file`, `--config`,
`--data-dir`, `--broker-id`, ...): the start of a node of a controller quorum needs it; the
single node that is its own quorum formats itself at its first start, or here with
`--standalone`. `info` tells what each directory holds and exits 1 when one is not formatted,
does not read, or disagrees with the others. Nothing here reaches a broker: files only.
"""

from __future__ import annotations

import argparse
from typing import Any

from spark_log.node_config.broker_config import BrokerConfig
from spark_log.node_config.launch_flags import add_config_arguments, config_from_arguments
from spark_log.properties import ConfigError
from spark_log.storage.data_dir import formatter
from spark_log.storage.data_dir.formatter import DirectoryState
from spark_log.storage.data_dir.meta_properties import new_cluster_id

from .errors import EXIT_FAILURE, CliError
from .output import print_json, print_lines


def add_storage_parser(commands: Any) -> None:
    p = commands.add_parser("storage", help="format and inspect a node's directories",
                            description="A node's data directories: cluster id, format, info "
                                        "(kafka-storage.sh).")
    actions = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    uuid = actions.add_parser("random-uuid", help="print a new cluster id")
    uuid.set_defaults(run=_random_uuid)
    fmt = actions.add_parser("format", help="write meta.properties into the node's directories",
                             description="Format the log directories and the metadata log "
                                         "directory of the node the settings describe.")
    fmt.add_argument("--cluster-id", "-t", required=True,
                     help="the cluster id (from `spark-log storage random-uuid`)")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="leave directories already formatted for this cluster and node as "
                          "they are and format the others")
    fmt.add_argument("--standalone", "-s", action="store_true",
                     help="format a controller that is a quorum of its own (no "
                          "controller.quorum.voters)")
    add_config_arguments(fmt)
    fmt.set_defaults(run=_format)
    info = actions.add_parser("info", help="what each of the node's directories holds")
    add_config_arguments(info)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(run=_info)


def _random_uuid(args: argparse.Namespace) -> int:
    print(new_cluster_id())
    return 0


def _config(args: argparse.Namespace) -> BrokerConfig:
    try:
        return config_from_arguments(args)
    except ConfigError as e:
        raise CliError(str(e)) from None


def _format(args: argparse.Namespace) -> int:
    try:
        formatter.check_cluster_id(args.cluster_id)
    except ConfigError as e:
        raise CliError(str(e)) from None
    config = _config(args)
    _check_quorum(config, args.standalone)
    configured = config.get("cluster.id")
    if configured and configured != args.cluster_id:
        raise CliError(f"--cluster-id {args.cluster_id} is not the cluster.id of the settings "
                       f"({configured})")
    dirs = config.storage_dirs
    try:
        done = formatter.format_dirs(dirs, args.cluster_id, config.node_id,
                                     args.ignore_formatted)
    except ConfigError as e:
        raise CliError(str(e)) from None
    if not done.written:
        print("All of the log directories are already formatted.")
    for path in done.written:
        kind = "metadata directory" if path == config.metadata_log_dir else "data directory"
        print(f"Formatting {kind} {path} for cluster {args.cluster_id}, node {config.node_id}.")
    return 0


def _check_quorum(config: BrokerConfig, standalone: bool) -> None:
    """kafka-storage.sh's rule: a controller without voters is formatted as a quorum of its own
    only when told so (--standalone), and --standalone means a quorum of this node alone."""
    if standalone:
        if not config.is_controller:
            raise CliError("You can only use --standalone on a controller.")
        others = sorted(set(config.voters) - {config.node_id})
        if others:
            raise CliError("--standalone formats a quorum of this node alone, but "
                           f"controller.quorum.voters also lists {others}")
    elif config.is_controller and not config.voters:
        raise CliError("Because controller.quorum.voters is not set on this controller, it is a "
                       "quorum of its own: say so with --standalone (or list the quorum in "
                       "controller.quorum.voters)")


def _info(args: argparse.Namespace) -> int:
    config = _config(args)
    states = formatter.inspect(config.storage_dirs)
    problems = [s.problem for s in states if s.problem] + _disagreements(states)
    if args.json:
        print_json({"directories": [_state_json(s) for s in states], "problems": problems})
    else:
        _print_info(states, problems)
    return EXIT_FAILURE if problems else 0


def _disagreements(states: list[DirectoryState]) -> list[str]:
    metas = [s.meta for s in states if s.meta is not None]
    found = []
    if len({m.cluster_id for m in metas}) > 1:
        found.append("Mismatched cluster IDs between storage directories.")
    if len({m.node_id for m in metas}) > 1:
        found.append("Mismatched node IDs between storage directories.")
    return found


def _state_json(state: DirectoryState) -> dict[str, Any]:
    meta = state.meta
    return {"path": str(state.path), "formatted": meta is not None,
            "version": meta and meta.version, "cluster_id": meta and meta.cluster_id,
            "node_id": meta and meta.node_id, "directory_id": meta and meta.directory_id}


def _print_info(states: list[DirectoryState], problems: list[str]) -> None:
    formatted = [s for s in states if s.meta is not None]
    lines = []
    if formatted:
        lines.append("Found log directory:" if len(formatted) == 1 else
                     "Found log directories:")
        for state in formatted:
            meta = state.meta
            assert meta is not None
            lines.append(f"  {state.path}: version={meta.version} cluster.id={meta.cluster_id} "
                         f"node.id={meta.node_id} directory.id={meta.directory_id or '-'}")
        lines.append("")
    if problems:
        lines.append("Found problem:" if len(problems) == 1 else "Found problems:")
        lines.extend(f"  {problem}" for problem in problems)
        lines.append("")
    print_lines(lines)
