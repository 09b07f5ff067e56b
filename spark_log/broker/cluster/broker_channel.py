"""Requests from this broker to the other brokers of the cluster (what Kafka's inter-broker
channels carry; here, the transaction coordinator's WriteTxnMarkers): one connection per
broker, to the endpoint its registration names on the clients' listener, and the partitions'
leaders as this broker's metadata has them.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from spark_log.client.async_connection import AsyncConnection
from spark_log.metadata import PartitionRegistration

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0


class ClusterView(Protocol):
    """The metadata cache, as the channel reads it."""

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None: ...

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None: ...


class BrokerChannel:
    """Invariants: one connection per broker id, replaced when the broker's endpoint changes;
    a request to a broker that cannot be reached answers None. Event-loop only."""

    def __init__(self, node_id: int, cluster: ClusterView, listener: str) -> None:
        self.node_id, self.cluster, self.listener = node_id, cluster, listener
        self._connections: dict[int, AsyncConnection] = {}

    def leader_of(self, topic: str, partition: int) -> int:
        state = self.cluster.partition(topic, partition)
        return -1 if state is None else state.leader

    async def send(self, broker_id: int, request: Any) -> Any | None:
        endpoint = self.cluster.endpoint(broker_id, self.listener)
        if endpoint is None:
            return None
        connection = self._connections.get(broker_id)
        if connection is None or (connection.host, connection.port) != endpoint:
            if connection is not None:
                await connection.close()
            connection = self._connections[broker_id] = AsyncConnection(
                *endpoint, f"broker-{self.node_id}")
        try:
            return await connection.call(request, REQUEST_TIMEOUT_S)
        except ConnectionError as e:
            log.info("Broker %d could not be reached: %s", broker_id, e)
            return None

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
