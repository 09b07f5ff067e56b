"""A consumer's fetch at the log end long-polls: it parks until an append or max_wait, and an
error in any partition (a stale leader epoch, an unknown topic) is answered at once."""

from __future__ import annotations

import threading
import time
from typing import Any

from spark_log.protocol import ErrorCode
from tests.broker.raw_client import RawClient
from tests.broker.test_bad_input import batch, create, fetch_one, leader_epoch, produce, unique
from tests.broker_process import BrokerProcess

LONG_WAIT_MS = 30_000  # far longer than any answer below may take


def fetch(client: RawClient, topic: str, offset: int, max_wait_ms: int, epoch: int = -1,
          isolation_level: int = 0) -> tuple[Any, float]:
    """The partition's entry of a one-partition consumer fetch, and the seconds it took."""
    started = time.monotonic()
    entry = fetch_one(client, topic, offset=offset, max_wait_ms=max_wait_ms, epoch=epoch,
                      isolation_level=isolation_level)
    return entry, time.monotonic() - started


def topic_of_three(broker: BrokerProcess, prefix: str) -> str:
    """A new topic holding one batch of three records (high watermark 3)."""
    topic = unique(prefix)
    with RawClient(broker.bootstrap) as client:
        create(client, topic)
        produce(client, topic, batch())
    return topic


def test_a_fetch_at_the_end_waits_out_max_wait_when_nothing_arrives(
        shared_broker: BrokerProcess) -> None:
    topic = topic_of_three(shared_broker, "wait")
    with RawClient(shared_broker.bootstrap) as client:
        for isolation_level in (0, 1):  # read_uncommitted, read_committed
            entry, took = fetch(client, topic, 3, 300, isolation_level=isolation_level)
            assert entry.error_code == ErrorCode.none
            assert entry.high_watermark == 3 and not entry.records
            assert took >= 0.3


def test_a_fetch_at_the_end_is_answered_by_the_next_append(
        shared_broker: BrokerProcess) -> None:
    topic = topic_of_three(shared_broker, "woken")
    answered: list[tuple[Any, float]] = []
    with RawClient(shared_broker.bootstrap) as consumer:
        waiting = threading.Thread(
            target=lambda: answered.append(fetch(consumer, topic, 3, LONG_WAIT_MS)))
        waiting.start()
        with RawClient(shared_broker.bootstrap) as producer:
            produce(producer, topic, batch(2))
        waiting.join(LONG_WAIT_MS / 1000)
    [(entry, took)] = answered
    assert entry.error_code == ErrorCode.none and entry.high_watermark == 5
    assert entry.records and took < LONG_WAIT_MS / 1000 / 2


def test_a_stale_epoch_or_unknown_partition_at_the_end_is_answered_at_once(
        shared_broker: BrokerProcess) -> None:
    topic = topic_of_three(shared_broker, "stale")
    with RawClient(shared_broker.bootstrap) as client:
        entry, took = fetch(client, topic, 3, LONG_WAIT_MS, epoch=leader_epoch(client, topic) + 1)
        assert entry.error_code == ErrorCode.unknown_leader_epoch
        assert took < LONG_WAIT_MS / 1000 / 2
        entry, took = fetch(client, unique("missing"), 0, LONG_WAIT_MS)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
        assert took < LONG_WAIT_MS / 1000 / 2
