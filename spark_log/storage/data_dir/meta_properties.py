"""`meta.properties` of a data directory: which cluster and node it belongs to (as Kafka's).

Written once, when a directory is first used. On every later start the file is read strictly,
as Kafka reads it: a `version` (1, or 0 for the older layout), the node id (`node.id` in v1,
`broker.id` in v0) and a `cluster.id`, and the stored ids must equal the configured ones. A file
that cannot be read, lacks a key or names another node or cluster stops the start with a
`ConfigError` naming the file and the fault; an existing file is never rewritten, so a data
directory is never taken over by a broker it does not belong to.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

from spark_log.properties import ConfigError, read_properties_file
from spark_log.storage.data_dir.atomic_file import write_atomically

FILE_NAME = "meta.properties"
VERSION = 1
_NODE_KEY = {0: "broker.id", 1: "node.id"}  # the key holding the node id, by version


@dataclass(frozen=True)
class MetaProperties:
    """The identity of a data directory; `created` is true when this start wrote the file."""

    cluster_id: str
    node_id: int
    created: bool = False


def new_cluster_id() -> str:
    """A random id in Kafka's format: a UUID as 22 chars of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def load_or_create(data_dir: Path, node_id: int, cluster_id: str | None) -> MetaProperties:
    """The directory's identity, checked against the configured node id and cluster id (None:
    any); writes meta.properties only if the directory has none."""
    path = data_dir / FILE_NAME
    if not path.exists():
        return _create(path, node_id, cluster_id or new_cluster_id())
    stored = read(path)
    if stored.node_id != node_id:
        raise ConfigError(
            f"{path}: the data directory belongs to node {stored.node_id}, but this broker is "
            f"node {node_id} (--broker-id / node.id); start it as node {stored.node_id} or give "
            "it another data directory")
    if cluster_id and stored.cluster_id != cluster_id:
        raise ConfigError(
            f"{path}: the data directory belongs to cluster {stored.cluster_id}, but this broker "
            f"is configured with cluster.id={cluster_id}")
    return stored


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
    return MetaProperties(_required(path, props, "cluster.id"), int(node_text))


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


def _create(path: Path, node_id: int, cluster_id: str) -> MetaProperties:
    text = (f"#spark_log broker data directory\nversion={VERSION}\ncluster.id={cluster_id}\n"
            f"node.id={node_id}\n")
    write_atomically(path, text.encode())
    return MetaProperties(cluster_id, node_id, created=True)
