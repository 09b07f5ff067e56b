"""`meta.properties` of a data directory: which cluster and node it belongs to (as Kafka's).

Kafka's KRaft layout, version 1: `version=1`, `cluster.id`, `node.id` and `directory.id` (a
random id of the directory itself); version 0, the older layout, names the node `broker.id`.
The file is read strictly, as Kafka reads it: a missing key, an id that is not one, or another
node or cluster than the configured ones is a `ConfigError` naming the file and the fault. An
existing file is never rewritten, so a data directory is never taken over by a node it does not
belong to.

A directory gets its file from `spark-log storage format` (`data_dir.format`), or, for the single
node that is its own quorum, from `load_or_create` at its first start; a member of a controller
quorum starts only on formatted directories (`check_formatted`), so that all nodes of a cluster
hold the same cluster id.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from spark_log.properties import ConfigError, read_properties_file
from spark_log.storage.data_dir.atomic_file import write_atomically

FILE_NAME = "meta.properties"
VERSION = 1
_NODE_KEY = {0: "broker.id", 1: "node.id"}  # the key holding the node id, by version
_RESERVED_BELOW = 100  # Kafka reserves the ids 0..99 (as 128-bit numbers) for markers


@dataclass(frozen=True)
class MetaProperties:
    """The identity of a data directory; `created` is true when this start wrote the file."""

    cluster_id: str
    node_id: int
    created: bool = False
    directory_id: str | None = None
    version: int = VERSION


def new_cluster_id() -> str:
    """A random id in Kafka's format (Uuid.randomUuid): a UUID as 22 chars of URL-safe base64,
    never a reserved one nor one starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if int.from_bytes(raw, "big") >= _RESERVED_BELOW and not text.startswith("-"):
            return text


new_directory_id = new_cluster_id  # the same kind of id


def uuid_problem(text: str) -> str | None:
    """Why `text` is not a Kafka Uuid (22 chars of URL-safe base64, 16 bytes, not reserved),
    or None if it is one."""
    if len(text) > 24:
        return "too long to be a base64 UUID"
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return "not URL-safe base64"
    if len(raw) != 16 or base64.urlsafe_b64encode(raw).decode().rstrip("=") != text:
        return "not the 22-character base64 form of a 16-byte UUID"
    if int.from_bytes(raw, "big") < _RESERVED_BELOW:
        return "a reserved UUID"
    return None


def load_or_create(data_dir: Path, node_id: int, cluster_id: str | None) -> MetaProperties:
    """The directory's identity, checked against the configured node id and cluster id (None:
    any); writes meta.properties only if the directory has none."""
    path = data_dir / FILE_NAME
    if not path.exists():
        meta = MetaProperties(cluster_id or new_cluster_id(), node_id, created=True,
                              directory_id=new_directory_id())
        write(data_dir, meta)
        return meta
    stored = read(path)
    check_identity(path, stored, node_id, cluster_id)
    return stored


def check_identity(path: Path, stored: MetaProperties, node_id: int,
                   cluster_id: str | None) -> None:
    """ConfigError unless `stored` (read from `path`) names this node and cluster."""
    if stored.node_id != node_id:
        raise ConfigError(
            f"{path}: the data directory belongs to node {stored.node_id}, but this broker is "
            f"node {node_id} (--broker-id / node.id); start it as node {stored.node_id} or give "
            "it another data directory")
    if cluster_id and stored.cluster_id != cluster_id:
        raise ConfigError(
            f"{path}: the data directory belongs to cluster {stored.cluster_id}, but this broker "
            f"is configured with cluster.id={cluster_id}")


def check_formatted(dirs: Iterable[Path], node_id: int, cluster_id: str | None
                    ) -> MetaProperties:
    """The identity of a quorum member's directories, all formatted for this node and one
    cluster (Kafka's start-up check); ConfigError naming the first directory that is not."""
    first: tuple[Path, MetaProperties] | None = None
    directory_ids: dict[str, Path] = {}
    for data_dir in dirs:
        path = data_dir / FILE_NAME
        if not path.is_file():
            raise ConfigError(
                f"No {FILE_NAME} in {data_dir}: a node of a controller quorum does not format "
                "its directories itself; run `spark-log storage format --cluster-id ID` with "
                "its settings first (`spark-log storage random-uuid` makes a cluster id)")
        stored = read(path)
        check_identity(path, stored, node_id, cluster_id)
        if first is not None and stored.cluster_id != first[1].cluster_id:
            raise ConfigError(
                f"{path}: the data directory belongs to cluster {stored.cluster_id}, but "
                f"{first[0]} to cluster {first[1].cluster_id}: a node's directories belong to "
                "one cluster")
        if stored.directory_id in directory_ids:
            raise ConfigError(
                f"{path}: directory.id {stored.directory_id} is also the id of "
                f"{directory_ids[stored.directory_id]}: each directory has its own")
        if stored.directory_id:
            directory_ids[stored.directory_id] = data_dir
        first = first or (path, stored)
    if first is None:
        raise ConfigError("no data directory is configured (log.dirs)")
    return first[1]


def read(path: Path) -> MetaProperties:
    """Parse an existing meta.properties; ConfigError (naming `path`) if it is not valid."""
    props = _read_properties(path)
    version_text = _required(path, props, "version")
    if version_text not in ("0", "1"):
        raise ConfigError(f"{path}: unknown version {version_text!r} (expected 0 or 1)")
    node_key = _NODE_KEY[int(version_text)]
    node_text = _required(path, props, node_key)
    if not node_text.isdigit():
        raise ConfigError(f"{path}: {node_key} {node_text!r} is not a non-negative integer")
    directory_id = props.get("directory.id") or None
    problem = directory_id and uuid_problem(directory_id)
    if problem:
        raise ConfigError(f"{path}: directory.id {directory_id!r} is {problem}")
    return MetaProperties(_required(path, props, "cluster.id"), int(node_text),
                          directory_id=directory_id, version=int(version_text))


def write(data_dir: Path, meta: MetaProperties) -> None:
    """Write `meta` as `data_dir`'s meta.properties (version 1, Kafka's KRaft layout)."""
    lines = ["#spark_log data directory", f"version={VERSION}", f"cluster.id={meta.cluster_id}",
             f"node.id={meta.node_id}"]
    if meta.directory_id:
        lines.append(f"directory.id={meta.directory_id}")
    write_atomically(data_dir / FILE_NAME, ("\n".join(lines) + "\n").encode())


def _read_properties(path: Path) -> dict[str, str]:
    try:
        return read_properties_file(path)
    except ConfigError as e:  # names path and line already
        raise ConfigError(f"unreadable {FILE_NAME}: {e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file of key=value lines") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}") from None


def _required(path: Path, props: dict[str, str], key: str) -> str:
    value = props.get(key, "")
    if not value:
        raise ConfigError(f"{path}: no {key} (a broker's {FILE_NAME} holds version=1, node.id "
                          "and cluster.id)")
    return value
