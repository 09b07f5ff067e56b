"""The controller quorum's state, asked with DescribeQuorum (api key 55) as
kafka-metadata-quorum.sh asks it: of a controller listener, or of a broker, which forwards the
request to the active controller.

Each address is asked its API versions first, so a node that does not serve DescribeQuorum is
named as such (UNSUPPORTED_VERSION) rather than seen only as a closed connection; the request
then goes in the highest version both sides speak (v2 lists the voters' endpoints). Only the
quorum's leader describes it: a node that does not lead answers NOT_LEADER_OR_FOLLOWER with
the leader's id when it knows it. The leader is then asked at the endpoint the answers list
for it, else the next given address is tried. Every node asked at most once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_log.metadata.metadata_topic import METADATA_TOPIC
from spark_log.protocol import ErrorCode, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

from .async_connection import AsyncConnection

METADATA_PARTITION = 0
MAX_VERSION = 2
API_VERSIONS_VERSION = 0  # answered by every Kafka release and by controller listeners
CLIENT_ID = "spark-log-metadata-quorum"

Address = tuple[str, int]


@dataclass(frozen=True)
class QuorumAnswer:
    """A leader's description: `partition` is the kio PartitionData of the metadata partition,
    `endpoints` the voters' (listener, host, port) by id (v2), `version` the one spoken."""

    address: Address
    version: int
    partition: Any
    endpoints: dict[int, list[tuple[str, str, int]]]


@dataclass
class QuorumQueryError(Exception):
    """No node described the quorum: why each address failed, and the leader's id if a node
    named one whose address is unknown here."""

    failures: list[str] = field(default_factory=list)
    leader_id: int | None = None
    unsupported: bool = False

    def __str__(self) -> str:
        return "; ".join(self.failures)


class _Unsupported(Exception):
    pass


async def describe_quorum(addresses: Sequence[Address], timeout_s: float) -> QuorumAnswer:
    """The quorum as its leader describes it, asking `addresses` in order (and the leader,
    when a node names it and its endpoint). QuorumQueryError when none answers it."""
    queue, asked = list(addresses), set()
    error = QuorumQueryError()
    endpoints: dict[int, list[tuple[str, str, int]]] = {}
    while queue:  # each address at most once: bounded by the given ones plus the voters'
        address = queue.pop(0)
        if address in asked:
            continue
        asked.add(address)
        try:
            version, response = await _ask(address, timeout_s)
        except _Unsupported as exc:
            error.unsupported = True
            error.failures.append(f"{_text(address)}: {exc}")
            continue
        except ConnectionError as exc:
            error.failures.append(f"{_text(address)}: {_reason(exc)}")
            continue
        endpoints.update(voter_endpoints(response))
        partition, failure = _partition(response)
        if failure is None:
            return QuorumAnswer(address, version, partition, endpoints)
        error.failures.append(f"{_text(address)}: {failure}")
        if partition is not None and partition.error_code == ErrorCode.not_leader_or_follower:
            leader = int(partition.leader_id)
            error.leader_id = leader if leader >= 0 else error.leader_id
            queue[:0] = [(h, p) for _, h, p in endpoints.get(leader, [])]
    raise error


def voter_endpoints(response: Any) -> dict[int, list[tuple[str, str, int]]]:
    """{voter id: [(listener name, host, port)]} from a v2 answer's `nodes` (else empty)."""
    return {int(n.node_id): [(ln.name, ln.host, int(ln.port)) for ln in n.listeners]
            for n in getattr(response, "nodes", ())}


async def _ask(address: Address, timeout_s: float) -> tuple[int, Any]:
    connection = AsyncConnection(address[0], address[1], CLIENT_ID)
    try:
        version = await _version(connection, timeout_s)
        request = build(_request_type(ApiKey.DESCRIBE_QUORUM, version), {"topics": [{
            "topic_name": METADATA_TOPIC,
            "partitions": [{"partition_index": METADATA_PARTITION}]}]})
        return version, await connection.call(request, timeout_s)
    finally:
        await connection.close()


async def _version(connection: AsyncConnection, timeout_s: float) -> int:
    """The highest DescribeQuorum version both sides speak; _Unsupported if the node has none."""
    request = build(_request_type(ApiKey.API_VERSIONS, API_VERSIONS_VERSION), {})
    response = await connection.call(request, timeout_s)
    if response.error_code != ErrorCode.none:
        raise _Unsupported(f"ApiVersions answered {_name(response.error_code)}")
    for api in response.api_keys:
        if api.api_key == ApiKey.DESCRIBE_QUORUM and api.min_version <= MAX_VERSION:
            return min(int(api.max_version), MAX_VERSION)
    raise _Unsupported("this node does not serve DescribeQuorum (UNSUPPORTED_VERSION)")


def _request_type(key: ApiKey, version: int) -> type:
    spec = spec_for(key)
    assert spec is not None, key
    return spec.request_type(version)


def _partition(response: Any) -> tuple[Any, str | None]:
    """The metadata partition's data and, if it carries no description, why."""
    if response.error_code != ErrorCode.none:
        return None, _error(response.error_code, response.error_message)
    for topic in response.topics:
        for partition in topic.partitions:
            if topic.topic_name == METADATA_TOPIC and \
                    partition.partition_index == METADATA_PARTITION:
                if partition.error_code == ErrorCode.none:
                    return partition, None
                failure = _error(partition.error_code, partition.error_message)
                if partition.error_code == ErrorCode.not_leader_or_follower and \
                        partition.leader_id >= 0:
                    failure += f" (the leader is node {partition.leader_id})"
                return partition, failure
    return None, "the answer does not describe the metadata partition"


def _error(code: Any, message: str | None) -> str:
    return _name(code) + (f": {message}" if message else "")


def _name(code: Any) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {int(code)}"


def _reason(exc: ConnectionError) -> str:
    cause = exc.__cause__
    if isinstance(cause, TimeoutError):
        return "no answer in time"
    if isinstance(cause, asyncio.IncompleteReadError | ConnectionResetError):
        return "the node closed the connection"
    if isinstance(cause, OSError) and cause.errno:
        return os.strerror(cause.errno)
    return str(cause or exc)


def _text(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
