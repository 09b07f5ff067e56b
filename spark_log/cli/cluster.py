"""`spark-log cluster describe|cluster-id`: the cluster's id, its controller and its brokers,
from DescribeCluster (confluent-kafka's AdminClient.describe_cluster), as kafka-cluster.sh's
`cluster-id` prints the id.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from .connect import add_connection_arguments, connect, wait
from .errors import CliError
from .output import print_json, print_key_values, print_table

BROKER_HEADERS = ("ID", "HOST:PORT", "RACK")
DESCRIBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BrokerView:
    id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerView]


def add_cluster_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="the cluster's id, controller and brokers",
                                  description="Describe the cluster, like kafka-cluster.sh.")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    p = actions.add_parser("describe", help="cluster id, controller id and every broker")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_connection_arguments(p)
    p.set_defaults(run=_describe)
    p = actions.add_parser("cluster-id", help="the cluster id")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_connection_arguments(p)
    p.set_defaults(run=_cluster_id)


def describe_cluster(admin: Any) -> ClusterView:
    """The cluster as the broker describes it (DescribeCluster), brokers by id."""
    future = admin.describe_cluster(include_authorized_operations=False,
                                    request_timeout=DESCRIBE_TIMEOUT_S)
    result = wait(future, "describing the cluster", DESCRIBE_TIMEOUT_S + 5)
    return cluster_view(result)


def cluster_view(result: Any) -> ClusterView:
    """A ClusterView of confluent-kafka's DescribeClusterResult."""
    controller = getattr(result, "controller", None)
    brokers = sorted((BrokerView(n.id, n.host, n.port, n.rack or None)
                      for n in result.nodes or ()), key=lambda b: b.id)
    return ClusterView(result.cluster_id or None,
                       controller.id if controller is not None else None, brokers)


def cluster_rows(view: ClusterView) -> list[tuple[int, str, str | None]]:
    return [(b.id, _address(b.host, b.port), b.rack) for b in view.brokers]


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _describe(args: argparse.Namespace) -> int:
    view = describe_cluster(connect(args).admin())
    if args.json:
        print_json(asdict(view))
        return 0
    print_key_values([("Cluster ID", view.cluster_id), ("Controller ID", view.controller_id)])
    print()
    print_table(BROKER_HEADERS, cluster_rows(view))
    return 0


def _cluster_id(args: argparse.Namespace) -> int:
    view = describe_cluster(connect(args).admin())
    if view.cluster_id is None:
        raise CliError("the broker reported no cluster id")
    if args.json:
        print_json({"cluster_id": view.cluster_id})
    else:
        print(f"Cluster ID: {view.cluster_id}")
    return 0
