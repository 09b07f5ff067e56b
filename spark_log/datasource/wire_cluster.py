"""The driver's cluster queries over plain Kafka requests, where librdkafka is not needed.

`open_cluster` is how the driver gets a `client.Cluster`. On a plaintext cluster without other
client settings it is a `WireCluster`: Metadata, ListOffsets (one request per leader for all of
its partitions), OffsetFetch and OffsetCommit on connections kept for the cluster's lifetime — a
streaming query's source keeps one for the whole run, so a micro-batch's offset look-ups are two
round trips of well under a millisecond each, where librdkafka's admin client spends several
milliseconds handing each call to its threads and back. With TLS, SASL or any other librdkafka
property set, it is librdkafka's `Cluster`, which understands them (and rejects bad ones before
any job). Both raise the same errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_log.client.list_offsets import READ_COMMITTED, READ_UNCOMMITTED, OffsetsClient
from spark_log.client.wire import WireError

from .client import Cluster, TopicPartition, _names
from .errors import PylogConnectionError

# Settings the wire path honours itself; any other librdkafka property means librdkafka.
WIRE_SETTINGS = frozenset({"isolation.level", "group.id"})


def open_cluster(bootstrap: str, kafka_conf: Mapping[str, str], timeout_ms: int) -> Cluster:
    """The driver's handle on the cluster; close() it."""
    if set(kafka_conf) <= WIRE_SETTINGS:
        return WireCluster(bootstrap, kafka_conf, timeout_ms)
    return Cluster(bootstrap, kafka_conf, timeout_ms)


class WireCluster(Cluster):
    """`Cluster` over `OffsetsClient`. Not thread-safe; close() it."""

    def __init__(self, bootstrap: str, kafka_conf: Mapping[str, str], timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.kafka_conf = dict(kafka_conf)
        self.timeout_s = timeout_ms / 1000
        self.wire = OffsetsClient(bootstrap, self.timeout_s, client_id="pylog")
        level = str(kafka_conf.get("isolation.level", "read_committed")).lower()
        self.isolation = READ_UNCOMMITTED if level == "read_uncommitted" else READ_COMMITTED

    def close(self) -> None:
        self.wire.close()

    def topics(self, names: Iterable[str] | None = None) -> dict[str, list[int]]:
        try:
            found = self.wire.topics(names)
        except OSError as e:
            raise PylogConnectionError(
                f"Cannot reach the Kafka cluster at {self.bootstrap} (option "
                f"kafka.bootstrap.servers): {e}. Check the address and that the broker is "
                "running.") from None
        return {name: parts for name, parts in found.items() if not name.startswith("__")}

    def _offsets(self, stamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not stamps:
            return {}
        try:
            return self.wire.list_offsets(stamps, self.isolation)
        except (OSError, WireError) as e:
            raise PylogConnectionError(
                f"Listing offsets of {_names(list(stamps))} on {self.bootstrap} failed: {e}"
            ) from None

    def committed(self, group: str, tps: Iterable[TopicPartition]
                  ) -> dict[TopicPartition, int]:
        return {tp: offset for tp, (offset, _) in self.wire.fetch(group, list(tps)).items()}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.wire.commit(group, {tp: (offset, None) for tp, offset in offsets.items()})
