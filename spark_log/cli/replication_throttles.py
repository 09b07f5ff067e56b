"""The replication throttles of a reassignment, as kafka-reassign-partitions.sh sets and clears
them: per topic, `leader.replication.throttled.replicas` lists partition:broker for every
replica a move copies from (its sources) and `follower.replication.throttled.replicas` every
replica it copies to (its new destinations); per broker taking part, the dynamic
`leader.replication.throttled.rate` and `follower.replication.throttled.rate` get the rate.
Moves already in progress count too, so that resubmitting keeps them throttled. Clearing deletes
all of them (Kafka's tool cannot know which brokers earlier moves involved, so it clears every
broker of the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from spark_log.client.partition_reassignments import Ongoing

from .connect import wait

__all__ = ["BROKER_THROTTLES", "TOPIC_THROTTLES", "Moves", "clear_throttles", "moves",
           "set_throttles"]

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, "replica.alter.log.dirs.io.max.bytes.per.second")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Move:
    """One partition's move: the replicas holding its data, the ones it copies to."""

    sources: frozenset[int]
    destinations: frozenset[int]


@dataclass
class Moves:
    """Every partition moving, by topic then partition."""

    by_topic: dict[str, dict[int, Move]] = field(default_factory=dict)

    def leader_throttles(self) -> dict[str, str]:
        # Kafka sorts the entries as strings (a TreeSet): "10:1" before "2:1".
        return {topic: ",".join(sorted(f"{p}:{b}" for p, move in parts.items()
                                       for b in move.sources))
                for topic, parts in self.by_topic.items()}

    def follower_throttles(self) -> dict[str, str]:
        return {topic: ",".join(sorted(f"{p}:{b}" for p, move in parts.items()
                                       for b in move.destinations - move.sources))
                for topic, parts in self.by_topic.items()}

    def brokers(self) -> list[int]:
        return sorted({b for parts in self.by_topic.values() for move in parts.values()
                       for b in move.sources | move.destinations})


def moves(ongoing: Mapping[TopicPartition, Ongoing],
          proposed: Mapping[TopicPartition, Sequence[int]],
          current: Mapping[TopicPartition, Sequence[int]]) -> Moves:
    """The moves in progress plus the proposed ones (a partition already moving keeps its
    sources)."""
    result = Moves()
    for (topic, partition), move in ongoing.items():
        result.by_topic.setdefault(topic, {})[partition] = Move(
            frozenset(move.replicas) - frozenset(move.adding), frozenset(move.adding))
    for (topic, partition), replicas in proposed.items():
        parts = result.by_topic.setdefault(topic, {})
        sources = parts[partition].sources if partition in parts \
            else frozenset(current[(topic, partition)])
        parts[partition] = Move(sources, frozenset(replicas) - sources)
    return result


def set_throttles(admin: Any, planned: Moves, rate: int) -> None:
    """The topic-level replica lists and the broker-level rates of `planned`."""
    leaders, followers = planned.leader_throttles(), planned.follower_throttles()
    _alter(admin, [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        _set(LEADER_REPLICAS, leaders[topic]), _set(FOLLOWER_REPLICAS, followers[topic])])
        for topic in sorted(planned.by_topic)], "setting the topic throttles")
    for broker in planned.brokers():  # librdkafka sends a broker's configs to that broker
        _alter(admin, [ConfigResource(ConfigResource.Type.BROKER, str(broker),
                                      incremental_configs=[_set(LEADER_RATE, str(rate)),
                                                           _set(FOLLOWER_RATE, str(rate))])],
               f"setting the throttle rate of broker {broker}")


def clear_throttles(admin: Any, brokers: Iterable[int], topics: Iterable[str]) -> None:
    """Delete the broker-level rates of `brokers` and the replica lists of `topics`."""
    for broker in sorted(set(brokers)):
        _alter(admin, [ConfigResource(ConfigResource.Type.BROKER, str(broker),
                                      incremental_configs=[_delete(k) for k in BROKER_THROTTLES])],
               f"clearing the throttles of broker {broker}")
    _alter(admin, [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        _delete(k) for k in TOPIC_THROTTLES]) for topic in sorted(set(topics))],
        "clearing the topic throttles")


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def _delete(name: str) -> ConfigEntry:
    return ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)


def _alter(admin: Any, resources: list[ConfigResource], what: str) -> None:
    if not resources:
        return
    for future in admin.incremental_alter_configs(resources).values():
        wait(future, what)
