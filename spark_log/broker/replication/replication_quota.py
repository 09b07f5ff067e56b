"""Replication throttles (Kafka's ReplicationQuotaManager), as a reassignment sets them.

A topic's `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
list the replicas whose traffic is throttled (`partition:broker,...`, or `*` for all), and the
dynamic broker configs `leader.replication.throttled.rate` / `follower.replication.throttled.
rate` (this broker's own value, else the cluster default `""`) cap it in bytes per second,
measured over Kafka's window (11 samples of 1 s). Only replicas outside the ISR are held back —
catching up must never slow down the ISR, nor acks=all: a leader sends a throttled follower no
records while its leader-side rate is exceeded, and a follower leaves its throttled partitions
out of its fetches while its follower-side rate is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Literal

from spark_log.metadata import ConfigResource, ConfigResourceType, MetadataImage

Side = Literal["leader", "follower"]
UNLIMITED = 2**63 - 1  # Kafka's Long.MAX_VALUE: no throttle
SAMPLES, SAMPLE_S = 11, 1.0  # replication.quota.window.num, replication.quota.window.size.seconds


class RateWindow:
    """Bytes recorded over the last SAMPLES * SAMPLE_S seconds. Invariant: samples are in time
    order and none is older than the window."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        self._samples: deque[tuple[float, int]] = deque()
        self._started = monotonic()

    def record(self, size: int) -> None:
        self._samples.append((self.monotonic(), size))

    def rate(self) -> float:
        """Bytes per second over the window (or since the first record, if shorter)."""
        now = self.monotonic()
        horizon = now - SAMPLES * SAMPLE_S
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()
        elapsed = max(SAMPLE_S, now - max(horizon, self._started))
        return sum(size for _, size in self._samples) / elapsed


class ReplicationQuotas:
    """The throttles of one broker, read from the current metadata image. Event-loop only."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 monotonic: Callable[[], float]) -> None:
        self.node_id, self.image = node_id, image
        self._windows = {"leader": RateWindow(monotonic), "follower": RateWindow(monotonic)}
        self._seen: MetadataImage | None = None
        self._rates: dict[str, int] = {}
        self._listed: dict[tuple[str, str], frozenset[tuple[int, int]] | None] = {}

    def throttled(self, side: Side, topic: str, partition: int, broker: int) -> bool:
        """Whether `broker`'s replica of the partition is on `side`'s throttled list."""
        self._refresh()
        key = (side, topic)
        if key not in self._listed:
            self._listed[key] = _replicas(self._topic_config(
                topic, f"{side}.replication.throttled.replicas"))
        listed = self._listed[key]
        return listed is None or (partition, broker) in listed

    def exceeded(self, side: Side) -> bool:
        self._refresh()
        limit = self._rates[side]
        return limit < UNLIMITED and self._windows[side].rate() > limit

    def record(self, side: Side, size: int) -> None:
        if size:
            self._windows[side].record(size)

    def _refresh(self) -> None:
        image = self.image()
        if image is self._seen:
            return
        self._seen, self._listed = image, {}
        for side in ("leader", "follower"):
            name = f"{side}.replication.throttled.rate"
            own = image.configs.get(ConfigResource(ConfigResourceType.BROKER, str(self.node_id)),
                                    {})
            default = image.configs.get(ConfigResource(ConfigResourceType.BROKER, ""), {})
            value = own.get(name, default.get(name))
            self._rates[side] = int(value) if value is not None else UNLIMITED

    def _topic_config(self, topic: str, name: str) -> str:
        assert self._seen is not None
        found = self._seen.configs.get(ConfigResource(ConfigResourceType.TOPIC, topic), {})
        return found.get(name, "")


def _replicas(listed: str) -> frozenset[tuple[int, int]] | None:
    """(partition, broker) pairs of a throttled-replicas config; None for `*` (all)."""
    text = listed.strip()
    if text == "*":
        return None
    pairs = set()
    for entry in text.split(","):
        partition, _, broker = entry.strip().partition(":")
        if partition.strip().isdigit() and broker.strip().isdigit():
            pairs.add((int(partition), int(broker)))
    return frozenset(pairs)
