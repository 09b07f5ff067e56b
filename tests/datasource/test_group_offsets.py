"""The streaming source's consumer-group commits: stored by the time the call returns (Spark
ends the driver's Python worker without waiting for stop()), and never a brake on the query."""

from __future__ import annotations

import socket
import time

import pytest

from spark_log.datasource.client import Cluster
from spark_log.datasource.group_offsets import GroupCommitter
from spark_log.datasource.source import PylogDataSource
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique


def committed(broker: BrokerProcess, group: str, tps: list[tuple[str, int]]) -> dict:
    cluster = Cluster(broker.bootstrap, {}, 10_000)
    try:
        return cluster.committed(group, tps)
    finally:
        cluster.close()


def test_each_commit_is_stored_when_the_call_returns(shared_broker: BrokerProcess) -> None:
    topic = create_topic(shared_broker, unique("committer"), partitions=2)
    group = unique("group")
    committer = GroupCommitter(shared_broker.bootstrap, {}, group, 10_000)
    tps = [(topic, 0), (topic, 1)]
    try:
        for end in range(1, 21):  # no close(): each end must be in the group already
            committer.commit({(topic, 0): end, (topic, 1): 2 * end})
            assert committed(shared_broker, group, tps) == {(topic, 0): end, (topic, 1): 2 * end}
    finally:
        committer.close()


def test_latest_offset_has_committed_the_finished_batch_when_it_returns(
        shared_broker: BrokerProcess) -> None:
    from pyspark.sql.datasource import ReadAllAvailable

    topic = create_topic(shared_broker, unique("reader-commit"), partitions=2)
    group = unique("group")
    produce(shared_broker, topic, [f"v{i}" for i in range(10)], partition=1)
    source = PylogDataSource({"kafka.bootstrap.servers": shared_broker.bootstrap,
                              "subscribe": topic, "groupid": group})  # Spark lower-cases names
    reader = source.streamReader(source.schema())
    start = {topic: {"0": 0, "1": 4}}  # as Spark passes it
    try:
        end = reader.latestOffset(start, ReadAllAvailable())
        # Spark may SIGTERM this process right now (an AvailableNow run found no more data):
        # the batch that ended at `start` is in the group already.
        assert committed(shared_broker, group, [(topic, 0), (topic, 1)]) == {
            (topic, 0): 0, (topic, 1): 4}
        assert end == {topic: {"0": 0, "1": 10}}
    finally:
        reader.stop()


def test_an_unanswering_coordinator_holds_up_one_commit_at_most() -> None:
    with socket.socket() as silent:  # a loopback listener that accepts and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        committer = GroupCommitter(address, {}, "g", 1000)
        try:
            began = time.monotonic()
            committer.commit({("t", 0): 1})  # waits out the timeout, then stops waiting
            assert time.monotonic() - began >= 0.9
            began = time.monotonic()
            for end in range(2, 12):
                committer.commit({("t", 0): end})
            assert time.monotonic() - began < 0.5, "each commit waited for the coordinator"
            committer.close(timeout_s=10)  # the thread gives up on each send in turn
            assert committer.committed == {}
            assert address in (committer.last_error or "")
        finally:
            committer.close(timeout_s=0)


def test_an_end_reported_twice_is_sent_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_log.datasource import wire_cluster

    sent: list[dict] = []

    class Recording:  # counts the OffsetCommits the committer sends
        def commit(self, group: str, offsets: dict) -> None:
            sent.append(offsets)

        def close(self) -> None:
            pass

    monkeypatch.setattr(wire_cluster, "open_cluster", lambda *args: Recording())
    committer = GroupCommitter("unused:1", {}, "g", 1000)
    committer.commit({("t", 0): 5})  # latestOffset(start) of the next batch
    committer.commit({("t", 0): 5})  # Spark's commit(end) of the same batch
    committer.commit({("t", 0): 6})
    committer.close()
    assert sent == [{("t", 0): 5}, {("t", 0): 6}]
