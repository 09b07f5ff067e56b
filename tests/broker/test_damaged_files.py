"""Every file the broker owns, damaged every way, after a clean stop and after SIGKILL: the broker
starts, serves every record before the damage (a real consumer checks them, value by value),
takes new writes, and says in its log what it dropped; or, for what must not be guessed, it
exits with one line naming the file.

One broker holds a topic per kind of damage. After a clean stop, start-up checks only what it
reads anyway (each active segment's tail); damage further back is found by the first read that
reaches it, which takes the data directory offline until a restart recovers it. After SIGKILL
(no recovery point checkpointed yet) start-up recovers every segment, so all damage is found
there. The random positions come from a seed printed on failure: rerun with
SPARK_LOG_DAMAGE_SEED to replay one.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.broker.group.offsets_topic import partition_for
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records.batch_header import iter_headers
from tests.broker import damage_support as ds
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

START, READ, REBUILD = "found at start", "found by a read", "rebuilt"
SMALL_SEGMENTS = {"internal.segment.bytes": "4096", "index.interval.bytes": "1024"}


@dataclass(frozen=True)
class Case:
    damage: ds.Damage
    after_clean_stop: str  # START, READ or REBUILD
    transactional: bool = False


CASES = {
    "log-garbage-tail": Case(ds.garbage_tail, START),
    "log-zeroed-tail": Case(ds.zeroed_tail, START),
    "log-torn-last-batch": Case(ds.torn_last_batch, START),
    "log-active-truncated-anywhere": Case(ds.truncated_active_anywhere, START),
    "log-middle-truncated-anywhere": Case(ds.truncated_middle_anywhere, READ),
    "log-bad-crc-in-the-middle": Case(ds.bad_crc_in_the_middle, READ),
    "log-base-offset-above-first-batch": Case(ds.base_offset_above_first_batch, READ),
    **{f"{kind}-{how}": Case(ds._index_damage(f".{kind}", how), REBUILD)
       for kind in ("index", "timeindex")
       for how in ("garbage", "zeroed", "truncated", "deleted", "wrong-entry")},
    "txnindex-garbage": Case(ds.txn_index_damage, REBUILD, transactional=True),
    **{f"snapshot-{how}": Case(ds.snapshot_damage(how), REBUILD, transactional=True)
       for how in ("garbage", "truncated", "deleted")},
    "leader-epoch-checkpoint-garbage": Case(ds.leader_epoch_checkpoint_garbage, REBUILD),
}
FOREIGN_DIRS = ("notes", "orders-x", "bad topic-0", "-3")


@pytest.fixture
def new_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker on tmp_path (not started); killed at the end whatever the test did."""
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    yield broker
    broker.kill()


@pytest.fixture
def seed() -> Iterator[int]:
    value = int(os.environ.get("SPARK_LOG_DAMAGE_SEED", random.randrange(1 << 32)))
    yield value
    print(f"damage seed: SPARK_LOG_DAMAGE_SEED={value}")


def full_log(broker: BrokerProcess) -> str:
    return broker.log_path.read_text(errors="replace")


def create_topics(broker: BrokerProcess, names: list[str], **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(n, 1, 1, config=configs) for n in names])
    for future in futures.values():
        future.result(30)


def produce_plain(broker: BrokerProcess, topic: str, count: int = 240) -> list[bytes]:
    """`count` records in batches of about six, so the topic has several segments."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    values = [f"{topic}:{i}:".encode() + b"x" * 60 for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=0)
        if i % 6 == 5:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0
    return values


def produce_transactions(broker: BrokerProcess, topic: str) -> tuple[list[bytes], Producer]:
    """Committed and aborted transactions across segments, and one left open; returns the
    committed values (all a read_committed consumer may see) and the open producer."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic,
                         "linger.ms": 5, "transaction.timeout.ms": 120_000})
    producer.init_transactions(30)
    committed = []
    for txn in range(16):
        producer.begin_transaction()
        values = [f"{topic}:{txn}:{i}:".encode() + b"y" * 300 for i in range(4)]
        for value in values:
            producer.produce(topic, value, partition=0)
        assert producer.flush(30) == 0  # in the log, so an abort leaves a marker
        if txn % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    producer.begin_transaction()
    producer.produce(topic, b"open transaction", partition=0)
    assert producer.flush(30) == 0  # written, never committed
    return committed, producer


def commit_groups(broker: BrokerProcess, topic: str, groups: int) -> dict[str, int]:
    """One offset commit per group (one batch each in __consumer_offsets)."""
    committed = {}
    for g in range(groups):
        group = f"damage-group-{g}"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, 0, 1000 + g)], asynchronous=False)
        consumer.close()
        committed[group] = 1000 + g
    return committed


def committed_offset(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def damage_offsets_partition(data: Path, groups: dict[str, int], rng: random.Random
                             ) -> set[str]:
    """Flip a byte inside a middle batch of the __consumer_offsets partition holding the most
    groups; returns the groups whose commits lie at or after it (which may be lost)."""
    by_partition: dict[int, list[str]] = {}
    for group in groups:  # in commit order, so in offset order within a partition
        by_partition.setdefault(partition_for(group, 50), []).append(group)
    partition, members = max(by_partition.items(), key=lambda item: len(item[1]))
    (segment,) = ds.layout(data / f"__consumer_offsets-{partition}")
    assert len(segment.batches) == len(members)
    victim = len(members) // 2
    pos, header = segment.batches[victim]
    ds.flip_byte(segment.log, pos + 61 + rng.randrange(header.size - 61))
    return set(members[victim:])


def fetch_error(broker: BrokerProcess, topic: str) -> int:
    """Fetch the partition from its start, as a consumer would, until a fetch answers an error
    (returned) or nothing more."""
    offset = 0
    with RawClient(broker.bootstrap) as client:
        while True:
            response = client.request(ApiKey.FETCH, 11, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
            partition = response.responses[0].partitions[0]
            if partition.error_code != ErrorCode.none or not partition.records:
                return partition.error_code
            *_, (_, last) = iter_headers(bytes(partition.records))
            offset = last.next_offset


def check_topic(broker: BrokerProcess, topic: str, expected: list[bytes]) -> None:
    """A read_committed consumer sees exactly `expected`; a new record is then written after
    them (read uncommitted: a transaction left open holds back read_committed readers)."""
    seen = [value for _, value in ds.read_all(broker.bootstrap, topic)]
    assert seen == expected, f"{topic}: {len(seen)} records served, {len(expected)} expected"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"after the damage", partition=0)
    assert producer.flush(30) == 0
    after = ds.read_all(broker.bootstrap, topic, committed=False)
    assert after[-1][1] == b"after the damage"


def expected_records(values: list[bytes], cut: int | None, plain: bool) -> list[bytes]:
    """The records that must survive: those below the cut (for a plain topic record i is at
    offset i; a transactional topic is only ever damaged where nothing may be lost)."""
    if cut is None:
        return values
    assert plain
    return values[:cut]


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
def test_every_damaged_file_is_repaired_or_found_and_nothing_before_the_damage_is_lost(
        new_broker: BrokerProcess, stop: str, seed: int) -> None:
    rng = random.Random(seed)
    broker = new_broker.start()
    data = broker.data_dir
    plain = [n for n, c in CASES.items() if not c.transactional]
    transactional = [n for n, c in CASES.items() if c.transactional]
    create_topics(broker, plain + transactional, **SMALL_SEGMENTS)
    values = {name: produce_plain(broker, name) for name in plain}
    open_producers = []
    for name in transactional:
        values[name], producer = produce_transactions(broker, name)
        open_producers.append(producer)
    groups = commit_groups(broker, plain[0], 24)
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    del open_producers  # their transactions stay open in the log

    cuts = {name: case.damage(data / f"{name}-0", rng) for name, case in CASES.items()}
    lost_groups = damage_offsets_partition(data, groups, rng)
    for name in FOREIGN_DIRS:
        (data / name).mkdir()
        (data / name / "keep.me").write_text("not ours")
    log_before = len(broker.log())
    broker.start()

    found_by_reads = [n for n, c in CASES.items() if stop == "clean" and
                      c.after_clean_stop == READ]
    for name in CASES:
        if name not in found_by_reads:
            check_topic(broker, name, expected_records(values[name], cuts[name],
                                                       not CASES[name].transactional))
    log = full_log(broker)[log_before:]
    for name, cut in cuts.items():
        if cut is not None and name not in found_by_reads:
            assert re.search(rf"{name}-0/\d{{20}}\.log is damaged at byte \d+ .*: dropped "
                             rf"(offsets {cut} to \d+|anything from offset {cut} on)", log), name
    for group, offset in groups.items():
        got = committed_offset(broker, group, plain[0])
        assert got == offset or (group in lost_groups and got < 0), (group, got)
    for name in FOREIGN_DIRS:
        assert (data / name / "keep.me").read_text() == "not ours"
        assert f"Skipping {data / name}: not a partition directory" in log

    for name in found_by_reads:  # each takes the directory offline; a restart recovers it
        assert fetch_error(broker, name) == ErrorCode.kafka_storage_error, name
        assert fetch_error(broker, plain[0]) == ErrorCode.kafka_storage_error  # the whole dir
        assert f"Log directory {data} is offline" in full_log(broker)
        broker.restart()
        check_topic(broker, name, expected_records(values[name], cuts[name], True))
        assert re.search(rf"{name}-0/\d{{20}}\.log is damaged at byte \d+ .*: dropped "
                         rf"(offsets {cuts[name]} to \d+|anything from offset {cuts[name]} on)",
                         full_log(broker)), name
    assert broker.stop() == 0


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
def test_a_middle_segment_cut_between_two_batches_leaves_a_gap_and_every_later_record_served(
        new_broker: BrokerProcess, stop: str, seed: int) -> None:
    """A cut exactly between two batches leaves a well-formed, shorter segment: a log with an
    offset gap, as compaction leaves them, so nothing marks it as damage. The records before
    the cut and every segment after it are served (dropping those would lose intact data),
    and the log takes new writes."""
    rng = random.Random(seed)
    broker = new_broker.start()
    create_topics(broker, ["gap"], **SMALL_SEGMENTS)
    values = produce_plain(broker, "gap")
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    segments = ds.layout(broker.data_dir / "gap-0")
    segment = ds.middle(segments)
    following = segments[segments.index(segment) + 1].base
    position, header = rng.choice(segment.batches[1:])  # a boundary inside the segment
    os.truncate(segment.log, position)
    broker.start()
    check_topic(broker, "gap", values[:header.base_offset] + values[following:])
    assert broker.stop() == 0


@pytest.mark.parametrize("stop", ["clean", "sigkill"])
def test_damaged_offset_checkpoints_are_rebuilt(new_broker: BrokerProcess, stop: str,
                                                seed: int) -> None:
    rng = random.Random(seed)
    broker = new_broker.start()
    names = ["checkpoints-a", "checkpoints-b"]
    create_topics(broker, names, **SMALL_SEGMENTS)
    values = {name: produce_plain(broker, name) for name in names}
    broker.stop() if stop == "clean" else broker.kill()
    files = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
             "replication-offset-checkpoint", "cleaner-offset-checkpoint"]
    for name in files:
        (broker.data_dir / name).write_bytes(rng.randbytes(40))
    broker.start()
    for name in names:
        check_topic(broker, name, values[name])
    assert broker.stop() == 0
    for name in files[:3]:  # written afresh at the clean shutdown
        assert (broker.data_dir / name).read_text().startswith("0\n")


@pytest.mark.parametrize("content", [b"garbage\x00\xff", b"", b"version=1\nnode.id=7\n"])
def test_a_damaged_meta_properties_stops_the_broker_with_one_line(new_broker: BrokerProcess,
                                                                  content: bytes) -> None:
    broker = new_broker.start()
    create_topics(broker, ["kept"])
    produce_plain(broker, "kept", 12)
    broker.stop()
    (broker.data_dir / "meta.properties").write_bytes(content)
    before = {p: p.read_bytes() for p in broker.data_dir.rglob("*") if p.is_file()}
    with pytest.raises(RuntimeError, match="broker exited with 2"):
        broker.start()
    lines = [line for line in broker.log().splitlines() if "ERROR" in line]
    assert len(lines) == 1 and "meta.properties" in lines[-1]
    assert "Traceback" not in broker.log()
    after = {p: p.read_bytes() for p in broker.data_dir.rglob("*") if p.is_file()}
    assert after == before
