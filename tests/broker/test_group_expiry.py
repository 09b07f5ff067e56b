"""offsets.retention.minutes end to end: a confluent-kafka group commits, leaves, and its offsets
expire a retention period after the group became empty — not before, and not for a group that
still has members. Kafka's smallest retention is one minute, so the broker runs in this process
on a ManualClock (in a thread of its own) and the test moves time; the clients are real."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.node import Node
from spark_log.clock import ManualClock

DEADLINE_S = 30.0
MINUTE_MS = 60_000


class ThreadedBroker:
    """The real broker on its own event loop in a thread, driven by a ManualClock."""

    def __init__(self, data_dir: Path, clock: ManualClock, config: dict[str, str]) -> None:
        props = {"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0", **config}
        self.broker = Node(BrokerConfig.from_properties(props), clock=clock)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.broker.start()
        self._ready.set()
        await self._stop.wait()
        await self.broker.stop()

    def start(self) -> ThreadedBroker:
        self._thread.start()
        assert self._ready.wait(30), "broker did not start"
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    def stop(self) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms=time.time_ns() // 1_000_000)  # producers stamp records with now


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[ThreadedBroker]:
    threaded = ThreadedBroker(tmp_path / "data", clock, {
        "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "50",
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}).start()
    yield threaded
    threaded.stop()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def committed(broker: ThreadedBroker, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def groups(broker: ThreadedBroker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


def stays(condition: Callable[[], bool], checks: int = 4) -> bool:
    """True if `condition` holds over several expiry passes (the check runs every 50 ms)."""
    for _ in range(checks):
        if not condition():
            return False
        time.sleep(0.1)
    return True


def test_offsets_of_an_empty_group_expire_after_offsets_retention_minutes(
        broker: ThreadedBroker, clock: ManualClock) -> None:
    topic, group, active = f"t-{uuid.uuid4().hex[:6]}", "leaving", "staying"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    failures: list[object] = []
    for i in range(10):
        producer.produce(topic, value=b"%d" % i,
                         on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(30) == 0 and failures == []

    members = {}
    for name in (group, active):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 120_000})  # outlives the moves of the clock
        c.subscribe([topic])
        got: list[object] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 10:
            assert time.monotonic() < deadline, "timed out consuming"
            got += c.consume(num_messages=10, timeout=0.2)
        c.commit(asynchronous=False)
        members[name] = c
    clock.advance(30_000)
    members[group].close()  # the group is empty from now on: its offsets age from here

    clock.advance(MINUTE_MS - 1)
    assert stays(lambda: committed(broker, group, topic) == 10)
    clock.advance(1)
    wait_for(lambda: committed(broker, group, topic) == OFFSET_INVALID, "the offsets to expire")
    wait_for(lambda: group not in groups(broker), "the empty group to be deleted")
    # the other group is Stable and subscribes to the topic: its offsets stay
    assert committed(broker, active, topic) == 10
    assert active in groups(broker)
    members[active].close()
