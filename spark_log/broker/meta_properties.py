"""`meta.properties` of a data directory: which cluster and node it belongs to (as Kafka's).

Written once when a directory is first used; on every later start the stored node id and
cluster id must match the configured ones, so a data directory is never served by a broker it
does not belong to.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from .broker_config import ConfigError, read_properties_file
from .topic_metadata import write_atomically

FILE_NAME = "meta.properties"


def new_cluster_id() -> str:
    """A random id in Kafka's format: a UUID as 22 chars of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def load_or_create(data_dir: Path, node_id: int, cluster_id: str | None) -> str:
    """The directory's cluster id, creating meta.properties if absent; raises ConfigError on a
    node or cluster id that differs from the stored one."""
    path = data_dir / FILE_NAME
    if path.exists():
        props = read_properties_file(path)
        stored_node = int(props.get("node.id", props.get("broker.id", node_id)))
        if stored_node != node_id:
            raise ConfigError(
                f"Stored node id {stored_node} doesn't match previous node id {node_id} in "
                f"{path}. If you moved your data, make sure your configured node id matches.")
        stored_cluster = props.get("cluster.id")
        if cluster_id and stored_cluster and stored_cluster != cluster_id:
            raise ConfigError(
                f"The cluster id {cluster_id} doesn't match stored cluster id {stored_cluster} "
                f"in {path}.")
        if stored_cluster:
            return stored_cluster
    cluster = cluster_id or new_cluster_id()
    text = f"#spark_log broker data directory\nversion=1\ncluster.id={cluster}\nnode.id={node_id}\n"
    write_atomically(path, text.encode())
    return cluster
