"""Formatting a node's directories, as `kafka-storage.sh format` does (Kafka's Formatter), and
telling what each one holds (`kafka-storage.sh info`).

`format_dirs` writes a version 1 meta.properties (the cluster id, the node id, a directory id of
its own) into every directory given that has none, creating the directory if needed. A
directory that already belongs to another cluster or node is refused, always; one that belongs
to this node and cluster is refused too unless `ignore_formatted`, and is then left as it is.
Every directory is checked before any is written, so a refusal changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_log.properties import ConfigError
from spark_log.storage.data_dir import meta_properties
from spark_log.storage.data_dir.meta_properties import FILE_NAME, MetaProperties


@dataclass(frozen=True)
class DirectoryState:
    """What a directory holds: its identity if formatted, else the problem (it does not
    exist, is not a directory, is not formatted, or its meta.properties does not read)."""

    path: Path
    meta: MetaProperties | None
    problem: str | None


@dataclass(frozen=True)
class Formatted:
    """What `format_dirs` did: the directories it wrote, those already formatted it left."""

    written: tuple[Path, ...]
    skipped: tuple[Path, ...]


def inspect(dirs: Sequence[Path]) -> list[DirectoryState]:
    """The state of each directory, in the order given; reads only."""
    return [_state(path) for path in dirs]


def _state(path: Path) -> DirectoryState:
    if not path.exists():
        return DirectoryState(path, None, f"{path} does not exist")
    if not path.is_dir():
        return DirectoryState(path, None, f"{path} is not a directory")
    if not (path / FILE_NAME).exists():
        return DirectoryState(path, None, f"{path} is not formatted")
    try:
        return DirectoryState(path, meta_properties.read(path / FILE_NAME), None)
    except ConfigError as e:
        return DirectoryState(path, None, str(e))


def format_dirs(dirs: Sequence[Path], cluster_id: str, node_id: int,
                ignore_formatted: bool = False) -> Formatted:
    """Give every directory of `dirs` without a meta.properties one for `cluster_id` and
    `node_id`; ConfigError (changing nothing) for a directory that cannot be formatted."""
    check_cluster_id(cluster_id)
    if not dirs:
        raise ConfigError("You must specify at least one directory to format")
    formatted = [path for path in dirs if _formatted(path, cluster_id, node_id)]
    if formatted and not ignore_formatted:
        raise ConfigError(f"Log directory {formatted[0]} is already formatted. Use "
                          "--ignore-formatted to ignore this directory and format the others.")
    written = []
    for path in dirs:
        if path not in formatted:
            _write(path, MetaProperties(cluster_id, node_id,
                                        directory_id=meta_properties.new_directory_id()))
            written.append(path)
    return Formatted(tuple(written), tuple(formatted))


def check_cluster_id(cluster_id: str) -> None:
    """ConfigError unless `cluster_id` is a cluster id in Kafka's form (a base64 UUID)."""
    problem = meta_properties.uuid_problem(cluster_id)
    if problem:
        raise ConfigError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
                          f"{problem} (`spark-log storage random-uuid` makes one)")


def _formatted(path: Path, cluster_id: str, node_id: int) -> bool:
    """Whether `path` is formatted already, for this cluster and node; ConfigError if it is
    for another, or if it cannot be a data directory."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} is not a directory: a file of that name exists")
    meta_path = path / FILE_NAME
    if not meta_path.exists():
        return False
    stored = meta_properties.read(meta_path)
    if stored.cluster_id != cluster_id:
        raise ConfigError(f"{meta_path}: the directory is formatted for cluster "
                          f"{stored.cluster_id}, not {cluster_id}; a directory of another "
                          "cluster is never formatted over")
    if stored.node_id != node_id:
        raise ConfigError(f"{meta_path}: the directory is formatted for node {stored.node_id}, "
                          f"not {node_id}; a directory of another node is never formatted over")
    return True


def _write(path: Path, meta: MetaProperties) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        meta_properties.write(path, meta)
    except OSError as e:
        raise ConfigError(f"Error while writing {FILE_NAME} into {path}: "
                          f"{e.strerror or e}") from None
