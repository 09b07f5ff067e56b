"""Broker access for the data source, through confluent-kafka (librdkafka) only.

The data source never imports the broker or storage: everything here is a Kafka client call, so
pylog works against any Kafka cluster. `bootstrap_for` resolves where the cluster is (the
`kafka.bootstrap.servers` option, or the embedded sidecar broker) — on the driver, so executors
receive a plain address. `Cluster` answers the driver's questions: which partitions a
subscription covers, offsets at earliest/latest/a timestamp, the consumer group's offsets.
Executors create their own consumers and producers from `consumer_conf` / `producer_conf`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .errors import PylogConnectionError, PylogTopicError
from .options import ClientOptions, Subscription

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

EARLIEST_TS, LATEST_TS = -2, -1  # ListOffsets' timestamps for the log start and end
READER_GROUP = "pylog-reader"  # librdkafka requires a group.id; readers never join or commit
T = TypeVar("T")
RETRY_BACKOFF_S = 0.2  # between attempts while a leader or coordinator moves
# Kafka error codes of a partition whose leader, or a group whose coordinator, is moving:
# LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS,
# COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
# OFFSET_NOT_AVAILABLE, and the client's own transport failure and timeout.
_MOVING = frozenset({5, 6, 7, 14, 15, 16, 74, 75, 78, -195, -185})


def bootstrap_for(client: ClientOptions) -> str:
    """The cluster's address: the option, or the sidecar broker (started if need be)."""
    if client.bootstrap:
        return client.bootstrap
    from spark_log import sidecar

    return sidecar.ensure_running(client.data_dir)


def base_conf(bootstrap: str, kafka_conf: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {"log_level": 3}  # librdkafka's informational disconnect lines off
    conf.update(kafka_conf)
    conf["bootstrap.servers"] = bootstrap
    return conf


def consumer_conf(bootstrap: str, kafka_conf: Mapping[str, str]) -> dict[str, Any]:
    conf = base_conf(bootstrap, kafka_conf)
    conf.setdefault("isolation.level", "read_committed")
    # Keep a deep prefetch queue of moderate fetches: measured fastest (bench/datasource_read).
    conf.setdefault("fetch.max.bytes", 52_428_800)
    conf.setdefault("max.partition.fetch.bytes", 2_097_152)
    conf.setdefault("queued.min.messages", 1_000_000)
    conf.setdefault("queued.max.messages.kbytes", 262_144)
    conf.setdefault("fetch.wait.max.ms", 100)
    conf.pop("group.id", None)
    conf.update({"group.id": READER_GROUP, "enable.auto.commit": False,
                 "enable.auto.offset.store": False, "enable.partition.eof": False,
                 "auto.offset.reset": "earliest"})
    return conf


def producer_conf(bootstrap: str, kafka_conf: Mapping[str, str]) -> dict[str, Any]:
    conf = base_conf(bootstrap, kafka_conf)
    conf.setdefault("enable.idempotence", True)
    conf.setdefault("acks", "all")
    # murmur2 of the key as the Java client hashes it; keyless records spread at random.
    conf.setdefault("partitioner", "murmur2_random")
    conf.setdefault("linger.ms", 5)
    conf.setdefault("batch.size", 1_000_000)
    return conf


def _isolation(kafka_conf: Mapping[str, str]) -> Any:
    from confluent_kafka import IsolationLevel

    level = str(kafka_conf.get("isolation.level", "read_committed")).lower()
    return (IsolationLevel.READ_UNCOMMITTED if level == "read_uncommitted"
            else IsolationLevel.READ_COMMITTED)


class Cluster:
    """Driver-side metadata and offset queries on one cluster. Not thread-safe; close() it.

    Invariant: every call either returns or raises a Pylog error naming the address; a cluster
    that cannot be reached fails within `timeout_ms` (sooner once librdkafka reports every
    broker down).
    """

    def __init__(self, bootstrap: str, kafka_conf: Mapping[str, str], timeout_ms: int) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.kafka_conf = dict(kafka_conf)
        self.timeout_s = timeout_ms / 1000
        self._down: str | None = None
        self._conf = base_conf(bootstrap, {k: v for k, v in kafka_conf.items()
                                           if k not in ("isolation.level", "group.id")})
        self._conf["error_cb"] = self._on_error
        try:
            self.admin = AdminClient(self._conf)
        except Exception as e:
            raise PylogConnectionError(
                f"Cannot create a Kafka client for {bootstrap} (kafka.bootstrap.servers): {e}"
            ) from None

    def _on_error(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._down = err.str()

    def close(self) -> None:
        self.admin = None  # librdkafka handles close when collected

    # ---- metadata ------------------------------------------------------------------------
    def topics(self, names: Iterable[str] | None = None) -> dict[str, list[int]]:
        """Topic name -> sorted partition ids (internal topics left out): of every topic, or at
        least of those of `names` that exist."""
        meta = self._metadata()
        return {name: sorted(t.partitions) for name, t in meta.topics.items()
                if not name.startswith("__") and t.error is None}

    def _metadata(self) -> Any:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return self.admin.list_topics(timeout=min(1.0, self.timeout_s))
            except KafkaException as e:
                if self._down is not None or time.monotonic() >= deadline:
                    reason = self._down or str(e.args[0].str() if e.args else e)
                    raise PylogConnectionError(
                        f"Cannot reach the Kafka cluster at {self.bootstrap} "
                        f"(option kafka.bootstrap.servers): {reason}. Check the address and "
                        "that the broker is running.") from None

    def partitions_for(self, sub: Subscription, *, must_exist: bool = True
                       ) -> list[TopicPartition]:
        """The partitions a subscription reads now, sorted."""
        topics = self.topics(None if sub.kind == "subscribePattern" else
                             sub.topics if sub.kind == "subscribe" else
                             {t for t, _ in sub.assignments})
        if sub.kind == "subscribe":
            missing = [t for t in sub.topics if t not in topics]
            if missing and must_exist:
                raise PylogTopicError(_missing_topics(missing, "subscribe", self.bootstrap))
            return sorted((t, p) for t in sub.topics for p in topics.get(t, []))
        if sub.kind == "subscribePattern":
            pattern = re.compile(sub.pattern or "")
            return sorted((t, p) for t, parts in topics.items() if pattern.fullmatch(t)
                          for p in parts)
        missing_tps = [f"{t}-{p}" for t, p in sub.assignments if p not in topics.get(t, [])]
        if missing_tps and must_exist:
            raise PylogTopicError(
                f"Option 'assign' names partitions that do not exist on {self.bootstrap}: "
                f"{', '.join(missing_tps)}.")
        return [(t, p) for t, p in sub.assignments if p in topics.get(t, [])]

    # ---- offsets -------------------------------------------------------------------------
    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets({tp: EARLIEST_TS for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets({tp: LATEST_TS for tp in tps})

    def for_times(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset with timestamp >= the given one; -1 where no record qualifies."""
        return self._offsets(dict(stamps))

    def _offsets(self, stamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets for Kafka timestamps (-2 earliest, -1 latest, else milliseconds)."""
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as KTP
        from confluent_kafka.admin import OffsetSpec

        if not stamps:
            return {}
        request = {KTP(t, p): (OffsetSpec.earliest() if ts == EARLIEST_TS else
                               OffsetSpec.latest() if ts == LATEST_TS else
                               OffsetSpec.for_timestamp(ts)) for (t, p), ts in stamps.items()}

        def attempt() -> dict[TopicPartition, int]:
            futures = self.admin.list_offsets(request, isolation_level=_isolation(
                self.kafka_conf), request_timeout=self.timeout_s)
            return {(k.topic, k.partition): f.result().offset for k, f in futures.items()}

        try:
            return self._while_moving(attempt)
        except KafkaException as e:
            raise PylogConnectionError(
                f"Listing offsets of {_names(list(stamps))} on {self.bootstrap} failed: "
                f"{e.args[0].str() if e.args else e}") from None

    def _while_moving(self, attempt: Callable[[], T]) -> T:
        """`attempt()`, again while it fails because a partition's leader or a group's
        coordinator is moving (a broker died), within the client's timeout."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return attempt()
            except KafkaException as e:
                error = e.args[0] if e.args else None
                if error is None or not (error.retriable() or error.code() in _MOVING) or \
                        time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_BACKOFF_S)
            # librdkafka's admin client keeps the coordinator it found and asks it again even
            # after it answered NOT_COORDINATOR: a new client looks the coordinator up afresh.
            self.admin = AdminClient(self._conf)

    # ---- consumer group offsets ----------------------------------------------------------
    def committed(self, group: str, tps: Iterable[TopicPartition]
                  ) -> dict[TopicPartition, int]:
        """The group's committed offsets; partitions without one are left out."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KTP

        request = [ConsumerGroupTopicPartitions(group, [KTP(t, p) for t, p in tps])]

        def attempt() -> dict[TopicPartition, int]:
            futures = self.admin.list_consumer_group_offsets(
                request, request_timeout=self.timeout_s)
            result = next(iter(futures.values())).result()
            _raise_moving(result.topic_partitions)
            return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                    if tp.offset >= 0 and tp.error is None}

        return self._while_moving(attempt)

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Store `offsets` as the group's committed offsets (the group needs no members)."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KTP

        request = [ConsumerGroupTopicPartitions(
            group, [KTP(t, p, off) for (t, p), off in sorted(offsets.items())])]

        def attempt() -> Any:
            futures = self.admin.alter_consumer_group_offsets(
                request, request_timeout=self.timeout_s)
            result = next(iter(futures.values())).result()
            _raise_moving(result.topic_partitions)
            return result

        result = self._while_moving(attempt)
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions
                  if tp.error is not None]
        if failed:
            raise RuntimeError(f"committing offsets of group {group!r} failed for "
                               f"{', '.join(failed)}")


def _raise_moving(partitions: Iterable[Any]) -> None:
    """Raise the first per-partition error that says a coordinator is moving (to retry)."""
    from confluent_kafka import KafkaException

    for tp in partitions:
        if tp.error is not None and tp.error.code() in _MOVING:
            raise KafkaException(tp.error)


def _names(tps: list[TopicPartition]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:5])
    return shown + (f" and {len(tps) - 5} more" if len(tps) > 5 else "")


def _missing_topics(missing: list[str], option: str, bootstrap: str) -> str:
    names = ", ".join(repr(t) for t in missing)
    return (f"Topic(s) {names} of option '{option}' do not exist on {bootstrap}. Create them "
            "first (or check the spelling).")


def sample_record_sizes(bootstrap: str, kafka_conf: Mapping[str, str],
                        starts: Mapping[TopicPartition, int], per_partition: int = 200,
                        timeout_s: float = 2.0) -> dict[TopicPartition, float]:
    """Average key+value+headers bytes of the first records at `starts` (for maxBytesPerTrigger);
    partitions that return nothing in time are estimated at 1 KiB."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    consumer = Consumer(consumer_conf(bootstrap, kafka_conf))
    totals: dict[TopicPartition, list[int]] = {tp: [0, 0] for tp in starts}
    try:
        consumer.assign([KTP(t, p, off) for (t, p), off in starts.items()])
        deadline = time.monotonic() + timeout_s
        wanted = per_partition * len(starts)
        while time.monotonic() < deadline and sum(n for _, n in totals.values()) < wanted:
            for m in consumer.consume(num_messages=wanted, timeout=0.2):
                if m.error() is None:
                    entry = totals[(m.topic(), m.partition())]
                    entry[0] += len(m.key() or b"") + len(m.value() or b"") + sum(
                        len(k) + len(v or b"") for k, v in (m.headers() or []))
                    entry[1] += 1
            if all(n >= per_partition for _, n in totals.values()):
                break
    finally:
        consumer.close()
    return {tp: (size / n if n else 1024.0) for tp, (size, n) in totals.items()}
