"""Replication throttles read from a metadata image: which replicas a topic's throttled lists
name, the rate from the broker's own config or the cluster default, and the rate measured over
the sampling window."""

from __future__ import annotations

from spark_log.broker.replication.replication_quota import (
    SAMPLE_S,
    SAMPLES,
    UNLIMITED,
    ReplicationQuotas,
)
from spark_log.metadata import ConfigResource, ConfigResourceType, MetadataImage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def image(broker: dict[str, str] | None = None, default: dict[str, str] | None = None,
          topic: dict[str, str] | None = None) -> MetadataImage:
    configs = {}
    if broker:
        configs[ConfigResource(ConfigResourceType.BROKER, "2")] = broker
    if default:
        configs[ConfigResource(ConfigResourceType.BROKER, "")] = default
    if topic:
        configs[ConfigResource(ConfigResourceType.TOPIC, "t")] = topic
    return MetadataImage(configs=configs)


def quotas(current: MetadataImage, clock: Clock | None = None) -> ReplicationQuotas:
    return ReplicationQuotas(2, lambda: current, clock or Clock())


def test_listed_replicas_are_throttled_and_others_not() -> None:
    q = quotas(image(topic={"follower.replication.throttled.replicas": "0:2, 1:3",
                            "leader.replication.throttled.replicas": "*"}))
    assert q.throttled("follower", "t", 0, 2)
    assert not q.throttled("follower", "t", 1, 2)
    assert q.throttled("follower", "t", 1, 3)
    assert q.throttled("leader", "t", 7, 2)  # "*": every replica
    assert not q.throttled("leader", "other", 0, 2)


def test_without_a_rate_nothing_is_exceeded() -> None:
    q = quotas(image(topic={"follower.replication.throttled.replicas": "*"}))
    q.record("follower", 10**12)
    assert not q.exceeded("follower")
    assert UNLIMITED == 2**63 - 1


def test_the_brokers_own_rate_wins_over_the_cluster_default() -> None:
    clock = Clock()
    q = quotas(image(broker={"follower.replication.throttled.rate": "1000"},
                     default={"follower.replication.throttled.rate": "1000000"}), clock)
    q.record("follower", 5000)
    assert q.exceeded("follower")  # 5000 B over the first second, limit 1000 B/s
    assert not q.exceeded("leader")
    q2 = quotas(image(default={"leader.replication.throttled.rate": "1000"}), clock)
    q2.record("leader", 5000)
    assert q2.exceeded("leader")


def test_the_rate_falls_as_time_passes_and_old_samples_leave_the_window() -> None:
    clock = Clock()
    q = quotas(image(broker={"follower.replication.throttled.rate": "1000"}), clock)
    q.record("follower", 5000)
    assert q.exceeded("follower")
    clock.now += 6 * SAMPLE_S  # 5000 B over 6 s: below 1000 B/s
    assert not q.exceeded("follower")
    q.record("follower", 4000)  # 9000 B over 6 s
    assert q.exceeded("follower")
    clock.now += (SAMPLES + 1) * SAMPLE_S  # every sample older than the window
    assert not q.exceeded("follower")
