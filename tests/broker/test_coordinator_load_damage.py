"""Damaged batches and records in `__consumer_offsets` and `__transaction_state`.

Real clients commit offsets for several groups and run a transaction to completion; the broker
is stopped (SIGTERM or SIGKILL) and batches are appended to the end of the partitions' active
segments: each has a valid CRC and the partition's next offsets, so storage keeps it (recovery
after SIGKILL checks every batch's CRC and offsets), but its contents cannot be read — a
compressed payload that does not decompress, an unknown codec id, records cut short, a bad
varint, record offsets outside the batch, a marker without a value, keys and values of unknown
versions. After them come valid records. On restart the coordinators skip exactly the damaged
batches and records, say so in the log, and load everything else, including what follows the
damage; commits and transactions then work as before.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.broker.group.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from spark_log.broker.group.offsets_topic import partition_for
from spark_log.broker.transaction import transaction_log_records as txn_log
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records import Compression, Record, build_batch
from spark_log.records.batch_header import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    iter_headers,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    write_crc,
)
from spark_log.records.control_record import ControlRecordType, control_record_key
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

OFFSETS_PARTITIONS, TXN_PARTITIONS = 4, 2
CONFIG = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
          "transaction.state.log.num.partitions": str(TXN_PARTITIONS)}
TOPIC = "orders"
GROUPS = [f"group-{n}" for n in range(8)]
TRANSACTIONAL_ID = "payments"
MARKER_PRODUCER_ID = 777_777  # far above any id the broker hands out in this test
DEADLINE_S = 60.0
NOW_MS = int(time.time() * 1000)
COMPLETE_COMMIT = 4  # TransactionLogValue's state id


# ---- crafting batches -----------------------------------------------------------------------


def reframed(batch: bytes, *, section: bytes | None = None, attributes: int | None = None,
             last_offset_delta: int | None = None) -> bytes:
    """`batch` with its records section, attributes or last offset delta replaced; its length
    and CRC made to fit, so only the contents are wrong."""
    fields = list(HEADER.unpack_from(batch))
    body = batch[HEADER_SIZE:] if section is None else section
    fields[1] = HEADER_SIZE - LOG_OVERHEAD + len(body)
    if attributes is not None:
        fields[5] = attributes
    if last_offset_delta is not None:
        fields[6] = last_offset_delta
    out = bytearray(HEADER.pack(*fields) + body)
    write_crc(out, 0, len(out))
    return bytes(out)


def records(pairs: list[tuple[bytes | None, bytes | None]]) -> list[Record]:
    return [Record(i, NOW_MS, key, value) for i, (key, value) in enumerate(pairs)]


def compressed_cut_in_half(pairs: list[tuple[bytes | None, bytes | None]],
                           codec: Compression) -> bytes:
    """A batch compressed with `codec` whose payload is cut in half: it cannot decompress."""
    whole = build_batch(records(pairs), compression=codec)
    section = whole[HEADER_SIZE:]
    return reframed(whole, section=section[: len(section) // 2])


def records_cut_short(pairs: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """An uncompressed batch whose last record lacks its last bytes."""
    whole = build_batch(records(pairs))
    return reframed(whole, section=whole[HEADER_SIZE:-3])


def bad_varint(pairs: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """The first record's length is a varint of seven bytes (five at most are allowed)."""
    whole = build_batch(records(pairs))
    return reframed(whole, section=b"\xff" * 6 + b"\x01" + whole[HEADER_SIZE:])


def unknown_codec(pairs: list[tuple[bytes | None, bytes | None]], codec_id: int) -> bytes:
    whole = build_batch(records(pairs))
    return reframed(whole, attributes=codec_id)


def offsets_beyond_the_batch(pairs: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """Three records in a batch whose header says it holds one offset."""
    return reframed(build_batch(records(pairs)), last_offset_delta=0)


def marker_batch(value: bytes | None, with_record: bool = True) -> bytes:
    """A control batch of a COMMIT marker whose value is `value` (None: a tombstone, where a
    marker must have one), or with no record at all."""
    pairs = [(control_record_key(ControlRecordType.COMMIT), value)] if with_record else []
    return build_batch(records(pairs), producer_id=MARKER_PRODUCER_ID, producer_epoch=0,
                       is_transactional=True, is_control=True)


class Tail:
    """The active segment of a stopped broker's partition, to which batches are appended at
    the partition's next offsets (with the leader epoch of its last batch)."""

    def __init__(self, partition_dir: Path) -> None:
        self.log = sorted(partition_dir.glob("*.log"))[-1]
        *_, (_, last) = iter_headers(self.log.read_bytes())
        self.next_offset = last.next_offset
        self.leader_epoch = last.partition_leader_epoch

    def append(self, batch: bytes) -> BatchHeader:
        buf = bytearray(batch)
        set_base_offset(buf, 0, self.next_offset)
        set_partition_leader_epoch(buf, 0, self.leader_epoch)
        header = read_header(buf)
        with open(self.log, "ab") as f:
            f.write(buf)
        self.next_offset = header.next_offset
        return header


# ---- __consumer_offsets ---------------------------------------------------------------------


def commit(group: str, offset: int) -> tuple[bytes, bytes]:
    return (encode_key(OffsetCommitKey(group, TOPIC, 0)),
            encode_offset_commit_value(OffsetCommitValue(offset, "", NOW_MS)))


def same_partition(prefix: str, partition: int, partitions: int) -> str:
    """The first name `prefix-N` that lives in `partition`."""
    return next(name for n in range(10_000) if partition_for(name := f"{prefix}-{n}", partitions)
                == partition)


@dataclass
class Expected:
    """What the broker log must say about the crafted batches, and what must load."""

    log_lines: list[str]
    committed: dict[str, int]  # group -> offset of partition 0 of TOPIC
    lost: list[str]  # groups whose only commit was in a skipped batch or record


def damage_offsets(data: Path, partition: int) -> Expected:
    tail = Tail(data / f"__consumer_offsets-{partition}")
    name = f"__consumer_offsets-{partition}"

    def lost(label: str) -> str:
        return same_partition(f"lost-{label}", partition, OFFSETS_PARTITIONS)

    codecs = [codec.name.lower() for codec in Compression if codec != Compression.NONE]
    batches = [
        *[(compressed_cut_in_half([commit(lost(codec), 1)], Compression[codec.upper()]),
           f"{codec} records") for codec in codecs],
        (records_cut_short([commit(lost("cut"), 2)] * 3), "invalid record size"),
        (bad_varint([commit(lost("varint"), 3)]), "bad varint"),
        (unknown_codec([commit(lost("codec"), 4)], 5), "unknown compression type id 5"),
        (offsets_beyond_the_batch([commit(lost("offsets"), 5)] * 3), "batch's last offset"),
    ]
    lines = []
    for batch, reason in batches:
        h = tail.append(batch)
        lines.append(f"{name}: batch at offsets {h.base_offset}..{h.last_offset} "
                     f"({h.records_count} records) cannot be decoded and is skipped: ")
        lines.append(reason)
    for marker in (marker_batch(None), marker_batch(None, with_record=False)):
        h = tail.append(marker)
        lines.append(f"{name}: control batch at offset {h.base_offset} of producer id "
                     f"{MARKER_PRODUCER_ID} cannot be read and is skipped")
    survivor = same_partition("survivor", partition, OFFSETS_PARTITIONS)
    lines += damage_offsets_records(tail, name, lost, survivor)
    after = same_partition("after-damage", partition, OFFSETS_PARTITIONS)
    tail.append(build_batch(records([commit(after, 4243)])))
    lost_groups = [lost(label) for label in
                   (*codecs, "cut", "varint", "codec", "offsets", "value-version")]
    return Expected(lines, {survivor: 4242, after: 4243}, lost_groups)


def damage_offsets_records(tail: Tail, name: str, lost: Callable[[str], str], survivor: str
                           ) -> list[str]:
    """One readable batch whose records are damaged one way each, and then a good one (a
    commit of `survivor`): only the damaged records are skipped."""
    twice = MemberMetadata("m-1", None, "client", "/127.0.0.1", 1000, 1000, b"", b"")
    duplicate_members = encode_group_metadata_value(
        GroupMetadataValue("consumer", 1, "range", "m-1", NOW_MS, (twice, twice)))
    pairs = [
        (commit(lost("value-version"), 6)[0], struct.pack(">h", 99) + bytes(30)),
        (b"\x00\x01\x00", commit(lost("key"), 7)[1]),
        (None, b"a value without a key"),
        (struct.pack(">h", 0x7000) + b"newer", b"value"),
        (encode_key(GroupMetadataKey(lost("members"))), duplicate_members),
        commit(survivor, 4242),
    ]
    h = tail.append(build_batch(records(pairs)))
    span = f"(batch {h.base_offset}..{h.last_offset}) cannot be read and is skipped: "
    return [
        f"{name}: record at offset {h.base_offset} {span}", "unknown version 99",
        f"{name}: record at offset {h.base_offset + 1} {span}", "__consumer_offsets key",
        f"{name}: record at offset {h.base_offset + 2} {span}a record without a key",
        f"{name}: unknown record type {0x7000} at offset {h.base_offset + 3} ignored",
        f"{name}: record at offset {h.base_offset + 4} {span}", "'m-1' appears twice",
    ]


# ---- __transaction_state --------------------------------------------------------------------


def txn_value(producer_id: int, epoch: int, state: int = COMPLETE_COMMIT) -> bytes:
    """A transaction committed at NOW_MS (no partitions: a finished transaction keeps none)."""
    return txn_log.encode_value(txn_log.TransactionLogValue(
        producer_id, epoch, 60_000, state, {}, NOW_MS, NOW_MS))


def txn_record(transactional_id: str, producer_id: int, epoch: int) -> tuple[bytes, bytes]:
    return txn_log.encode_key(transactional_id), txn_value(producer_id, epoch)


@dataclass
class ExpectedTxn:
    log_lines: list[str]
    loaded: dict[str, tuple[str, int, int]]  # id -> (state, producer id, epoch)
    lost: list[str]


def damage_transactions(data: Path, partition: int) -> ExpectedTxn:
    tail = Tail(data / f"__transaction_state-{partition}")
    name = f"__transaction_state-{partition}"

    def txn_id(prefix: str) -> str:
        return same_partition(prefix, partition, TXN_PARTITIONS)

    lines = []
    for batch, reason in (
            (compressed_cut_in_half([txn_record(txn_id("lost-gzip"), 900_010, 0)],
                                    Compression.GZIP), "gzip records"),
            (unknown_codec([txn_record(txn_id("lost-codec"), 900_011, 0)], 6),
             "unknown compression type id 6"),
            (records_cut_short([txn_record(txn_id("lost-cut"), 900_012, 0)] * 2),
             "invalid record size")):
        h = tail.append(batch)
        lines += [f"{name}: batch at offsets {h.base_offset}..{h.last_offset} "
                  f"({h.records_count} records) cannot be decoded and is skipped: ", reason]
    survivor, after = txn_id("survivor-txn"), txn_id("after-damage-txn")
    pairs = [
        (txn_log.encode_key(TRANSACTIONAL_ID), struct.pack(">h", 9) + bytes(40)),
        (txn_log.encode_key(txn_id("lost-state")), txn_value(900_013, 0, state=42)),
        (None, txn_value(900_014, 0)),
        (struct.pack(">hh", 5, 3) + b"new", txn_value(900_015, 0)),
        (struct.pack(">hh", 0, 2) + b"\xff\xfe", txn_value(900_016, 0)),
        txn_record(survivor, 900_001, 3),
    ]
    h = tail.append(build_batch(records(pairs)))
    span = f"(batch {h.base_offset}..{h.last_offset})"
    skipped = "cannot be read and is skipped: "
    lines += [
        f"{name}: record at offset {h.base_offset} {span} for transactional id "
        f"'{TRANSACTIONAL_ID}' (its earlier state is kept) {skipped}", "unknown transaction log "
        "value version 9",
        f"{name}: record at offset {h.base_offset + 1} {span} for transactional id "
        f"'{txn_id('lost-state')}' (its earlier state is kept) {skipped}unknown transaction "
        "state 42",
        f"{name}: record at offset {h.base_offset + 2} {span} has no key and is skipped",
        f"{name}: record at offset {h.base_offset + 3} ignored: unknown transaction log key "
        "version 5",
        f"{name}: record at offset {h.base_offset + 4} {span} {skipped}transaction log key: "
        "invalid UTF-8",
    ]
    tail.append(build_batch(records([txn_record(after, 900_002, 0)])))
    loaded = {survivor: ("CompleteCommit", 900_001, 3), after: ("CompleteCommit", 900_002, 0)}
    lost = [txn_id(p) for p in ("lost-gzip", "lost-codec", "lost-cut", "lost-state")]
    return ExpectedTxn(lines, loaded, lost)


# ---- clients --------------------------------------------------------------------------------


def commit_offsets(broker: BrokerProcess, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(broker: BrokerProcess, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def run_transaction(broker: BrokerProcess, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, value, partition=0)
    producer.commit_transaction(30)


def describe(broker: BrokerProcess, transactional_id: str) -> tuple[int, str, int, int]:
    """(error, state, producer id, epoch), once the id's partition has loaded."""
    deadline = time.monotonic() + DEADLINE_S
    with RawClient(broker.bootstrap) as client:
        while True:
            (found,) = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {
                "transactional_ids": [transactional_id]}).transaction_states
            if found.error_code != ErrorCode.coordinator_load_in_progress:
                return (found.error_code, found.transaction_state, found.producer_id,
                        found.producer_epoch)
            assert time.monotonic() < deadline, f"{transactional_id}: still loading"
            time.sleep(0.05)


def listed(broker: BrokerProcess) -> set[str]:
    """Every transactional id the coordinator knows (ListTransactions), once all have loaded."""
    deadline = time.monotonic() + DEADLINE_S
    with RawClient(broker.bootstrap) as client:
        while True:
            response = client.request(ApiKey.LIST_TRANSACTIONS, 1, {
                "state_filters": [], "producer_id_filters": [], "duration_filter": -1})
            if response.error_code == ErrorCode.none:
                return {t.transactional_id for t in response.transaction_states}
            assert response.error_code == ErrorCode.coordinator_load_in_progress, response
            assert time.monotonic() < deadline, "transactional ids still loading"
            time.sleep(0.05)


def await_complete(broker: BrokerProcess) -> tuple[int, int]:
    """Wait until the transaction's CompleteCommit is written; its producer id and epoch."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        error, state, producer_id, epoch = describe(broker, TRANSACTIONAL_ID)
        if (error, state) == (ErrorCode.none, "CompleteCommit"):
            return producer_id, epoch
        assert time.monotonic() < deadline, f"transaction still {state} ({error})"
        time.sleep(0.05)


# ---- the tests ------------------------------------------------------------------------------


def fill(broker: BrokerProcess) -> tuple[dict[str, int], tuple[int, int]]:
    """Commits of every group and a committed transaction; returns the commits and the
    transactional id's producer id and epoch."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(30)
    offsets = {group: 100 + n for n, group in enumerate(GROUPS)}
    for group, offset in offsets.items():
        commit_offsets(broker, group, offset)
    run_transaction(broker, b"before the damage")
    return offsets, await_complete(broker)


def busiest_partition(groups: list[str]) -> int:
    counts = [sum(partition_for(g, OFFSETS_PARTITIONS) == p for g in groups)
              for p in range(OFFSETS_PARTITIONS)]
    return counts.index(max(counts))


def assert_logged(log: str, fragments: list[str]) -> None:
    """Each fragment is in the log, in order (a reason follows the line it belongs to)."""
    position = 0
    for fragment in fragments:
        found = log.find(fragment, position)
        assert found >= 0, f"not in the broker log after byte {position}: {fragment!r}\n{log}"
        position = found


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_damaged_coordinator_batches_and_records_are_skipped_and_all_else_loads(
        tmp_path: Path, stop: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", CONFIG).start()
    try:
        offsets, (producer_id, epoch) = fill(broker)
        if stop == "SIGTERM":
            assert broker.stop() == 0
        else:
            broker.kill()
        damaged = busiest_partition(GROUPS)
        assert sum(partition_for(g, OFFSETS_PARTITIONS) == damaged for g in GROUPS) >= 2
        expected = damage_offsets(broker.data_dir, damaged)
        txn_expected = damage_transactions(broker.data_dir,
                                           partition_for(TRANSACTIONAL_ID, TXN_PARTITIONS))
        broker.start()

        for group, offset in {**offsets, **expected.committed}.items():
            assert committed(broker, group) == offset, group
        for group in expected.lost:
            assert committed(broker, group) == OFFSET_INVALID, group
        assert describe(broker, TRANSACTIONAL_ID) == (ErrorCode.none, "CompleteCommit",
                                                       producer_id, epoch)
        for transactional_id, (state, pid, pid_epoch) in txn_expected.loaded.items():
            assert describe(broker, transactional_id) == (ErrorCode.none, state, pid, pid_epoch)
        known = listed(broker)
        assert set(txn_expected.loaded) | {TRANSACTIONAL_ID} <= known
        assert not known & set(txn_expected.lost)

        in_damaged = next(g for g in GROUPS if partition_for(g, OFFSETS_PARTITIONS) == damaged)
        commit_offsets(broker, in_damaged, 5000)
        assert committed(broker, in_damaged) == 5000
        run_transaction(broker, b"after the damage")
        assert await_complete(broker) == (producer_id, epoch + 1)

        log = broker.log_path.read_text(errors="replace")
        assert_logged(log, expected.log_lines)
        assert_logged(log, txn_expected.log_lines)
    finally:
        broker.stop()
