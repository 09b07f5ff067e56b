"""Log compaction through LogCleaner rounds, with a ManualClock: what is kept, what goes, and
that offsets, order, producer state and transactions survive."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from spark_log.clock import ManualClock
from spark_log.records import Compression, Record, build_batch
from spark_log.records.batch_header import iter_headers
from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.cleaner.cleaner_config import CleanerConfig
from spark_log.storage.cleaner.log_cleaner import InlineDriver, LogCleaner
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

from ..batches import DEFAULT_TS
from ..cleaner_support import (
    clean,
    clean_until_done,
    compact_config,
    keyed_batch,
    latest,
    read_all,
    updates_over,
    write_updates,
)

RETENTION_MS = 60_000
# Every test once with the native offset-map table and once with the pure-Python one.
pytestmark = pytest.mark.usefixtures("key_offsets")


@pytest.fixture
def manager(tmp_path, clock) -> Iterator[LogManager]:  # type: ignore[no-untyped-def]
    logs = LogManager(str(tmp_path), default_config=compact_config(
        **{"delete.retention.ms": str(RETENTION_MS)}), clock=clock)
    yield logs
    logs.close()


@pytest.fixture
def cleaner(manager: LogManager) -> Iterator[LogCleaner]:
    c = LogCleaner(manager)
    yield c
    c.driver.close()


@pytest.fixture
def log(manager: LogManager) -> PartitionLog:
    return manager.get_or_create("t", 0)


def test_cleaning_keeps_the_latest_record_of_every_key_at_its_offset(log, cleaner) -> None:  # type: ignore
    updates = updates_over(keys=20, count=600)
    write_updates(log, updates)
    before = read_all(log)
    last_offsets = {r.key: r.offset for r in before.records}
    active = log.segments[-1]
    active_bytes = active.log.read(0, active.size)
    assert clean(cleaner) is not None
    after = read_all(log)
    assert after.by_key() == latest(updates)
    assert {r.key: r.offset for r in after.records} == last_offsets
    cleaned = [r for r in after.records if r.offset < active.base_offset]
    assert len({r.key for r in cleaned}) == len(cleaned)  # one record per key below the head
    assert log.segments[-1] is active and active.log.read(0, active.size) == active_bytes
    assert log.size_bytes < before_size(before) / 4
    assert log.log_start_offset == 0 and log.log_end_offset == 600


def before_size(read: object) -> int:
    return sum(h.size for h in read.headers)  # type: ignore[attr-defined]


def test_records_below_the_active_segment_are_all_compacted_once_rolled(log, cleaner) -> None:  # type: ignore
    updates = updates_over(keys=20, count=600)
    write_updates(log, updates)
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    assert len(after.records) == 20 and after.by_key() == latest(updates)
    assert after.offsets == sorted(after.offsets)
    assert log.log_end_offset == 600
    assert after.headers[-1].last_offset == 599  # the round's last batch stays, offsets kept


def test_tombstones_stay_until_the_delete_horizon_then_go(log, cleaner, clock) -> None:  # type: ignore
    updates = updates_over(keys=10, count=200, tombstone_every=7)
    write_updates(log, updates)
    expected = latest(updates)
    deleted = {k for k, v in expected.items() if v is None}
    assert deleted
    log.roll()
    first_clean = clock.now_ms()
    clean_until_done(cleaner)
    after = read_all(log)
    assert after.by_key() == expected  # tombstones still readable
    tombstone_batches = [h for h in after.headers
                         if any(r.value is None and h.base_offset <= r.offset <= h.last_offset
                                for r in after.records)]
    assert tombstone_batches and all(h.has_delete_horizon for h in tombstone_batches)
    assert all(h.base_timestamp == first_clean + RETENTION_MS for h in tombstone_batches)
    assert all(r.timestamp == DEFAULT_TS for r in after.records)  # timestamps unchanged

    clock.advance(RETENTION_MS - 1)
    dirty_again(log)
    clean_until_done(cleaner)
    assert {k for k, v in read_all(log).by_key().items() if v is None} == deleted

    clock.advance(1)
    dirty_again(log)
    clean_until_done(cleaner)
    final = read_all(log).by_key()
    assert not any(v is None for v in final.values())
    assert {k: v for k, v in final.items() if k != b"other"} == \
        {k: v for k, v in expected.items() if v is not None}


def dirty_again(log: PartitionLog) -> None:
    """One more record, rolled, so the log has something dirty to clean."""
    write_updates(log, [(b"other", b"x")])
    log.roll()


def test_a_batch_corrupted_after_it_was_cleaned_stops_the_next_round(log, cleaner) -> None:  # type: ignore
    """The rewrite copies a batch that this round's offset map did not walk only once its CRC
    checks."""
    write_updates(log, updates_over(keys=5, count=100))
    log.roll()
    assert clean(cleaner) is not None and cleaner.rounds == 1
    segment, data, position, header = next(
        (s, data, p, h) for s in log.segments[:-1] for data in [s.log.read(0, s.size)]
        for p, h in iter_headers(data) if h.records_count)
    last = position + header.size - 1  # a record's header count: read by no walk, only the CRC
    with open(segment.log.path, "r+b") as f:
        f.seek(last)
        f.write(bytes([data[last] ^ 0x02]))
    dirty_again(log)
    clean(cleaner)
    assert cleaner.rounds == 1 and cleaner.manager.is_uncleanable(log)


def test_idempotent_batches_are_kept_empty_with_their_producer_state(log, cleaner) -> None:  # type: ignore
    producer_batches = []
    for seq in range(0, 30, 3):
        info = log.append(keyed_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
                                      producer_id=7, producer_epoch=1, base_sequence=seq),
                          leader_epoch=0)
        producer_batches.append((info.first_offset, info.last_offset, seq))
    write_updates(log, [(k, b"final") for k in (b"a", b"b", b"c")] * 4)  # supersede them all
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    empties = [h for h in after.headers if h.records_count == 0]
    assert [(h.base_offset, h.last_offset, h.base_sequence) for h in empties] == \
        producer_batches
    assert all((h.producer_id, h.producer_epoch) == (7, 1) for h in empties)
    assert after.by_key() == {b"a": b"final", b"b": b"final", b"c": b"final"}
    assert len(after.records) == 3


def test_control_batches_and_aborted_transaction_index_survive(log, cleaner) -> None:  # type: ignore
    log.append(keyed_batch([(b"a", b"txn")], producer_id=5, producer_epoch=0, base_sequence=0,
                           transactional=True), leader_epoch=0)
    abort = build_end_transaction_batch(EndTransactionMarker(ControlRecordType.ABORT, 0),
                                        producer_id=5, producer_epoch=0, timestamp=DEFAULT_TS)
    marker_offset = log.append(abort, leader_epoch=0, origin=AppendOrigin.COORDINATOR).first_offset
    write_updates(log, [(b"a", b"plain")] * 10)
    log.roll()
    aborted_before = log.aborted_transactions(0, log.log_end_offset)
    assert [t.last_offset for t in aborted_before] == [marker_offset]
    clean_until_done(cleaner)
    after = read_all(log)
    control = [h for h in after.headers if h.is_control]
    assert [(h.base_offset, h.records_count) for h in control] == [(marker_offset, 1)]
    txn_data = [h for h in after.headers if h.is_transactional and not h.is_control]
    assert [h.records_count for h in txn_data] == [0]  # kept empty: it carries producer state
    assert log.aborted_transactions(0, log.log_end_offset) == aborted_before
    assert after.by_key()[b"a"] == b"plain"


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD, Compression.LZ4])
def test_compressed_batches_are_rewritten_with_their_codec(log, cleaner, codec) -> None:  # type: ignore
    updates = updates_over(keys=8, count=300)
    write_updates(log, updates, per_batch=10, compression=codec)
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    assert after.by_key() == latest(updates) and len(after.records) == 8
    assert all(h.compression == codec for h in after.headers if h.records_count)


def test_records_without_a_key_are_removed(tmp_path, clock) -> None:  # type: ignore
    plain = LogConfig.from_properties({"internal.segment.bytes": "2048",
                                       "message.timestamp.after.max.ms": str(10**12)})
    logs = LogManager(str(tmp_path), default_config=plain, clock=clock)
    log = logs.get_or_create("t", 0)
    write_updates(log, [(None, b"no key")] * 20 + [(b"k", b"v")] * 20)  # type: ignore[list-item]
    log.roll()
    logs.update_config("t", compact_config())  # the topic becomes compacted
    cleaner = LogCleaner(logs, driver=InlineDriver())
    clean_until_done(cleaner)
    assert read_all(log).by_key() == {b"k": b"v"}
    logs.close()


def test_a_small_offset_map_cleans_in_several_rounds(manager, log) -> None:  # type: ignore
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1024), driver=InlineDriver())
    assert cleaner.offset_map.capacity == 5
    updates = updates_over(keys=40, count=400)
    write_updates(log, updates)
    log.roll()
    checkpoints = []
    while clean(cleaner) is not None:
        checkpoints.append(cleaner.manager.checkpoint(("t", 0)))
    assert len(checkpoints) > 3 and checkpoints == sorted(checkpoints)
    assert checkpoints[-1] == log.segments[-1].base_offset
    after = read_all(log)
    assert after.by_key() == latest(updates) and len(after.records) == 40


def test_cleaned_segments_are_merged_up_to_the_segment_size(log, cleaner) -> None:  # type: ignore
    write_updates(log, updates_over(keys=30, count=900))
    log.roll()
    segments_before = len(log.segments)
    clean_until_done(cleaner)
    dirty_again(log)
    clean_until_done(cleaner)
    sizes = [s.size for s in log.segments[:-1]]
    assert len(log.segments) < segments_before / 3
    assert all(size <= log.config.segment_size for size in sizes)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_a_fetch_slice_cut_before_the_swap_stays_readable(log, cleaner) -> None:  # type: ignore
    write_updates(log, updates_over(keys=5, count=200))
    log.roll()
    cut = log.read(0, 1 << 20)
    expected = cut.read_bytes()
    clean_until_done(cleaner)
    assert cut.read_bytes() == expected
    assert read_all(log).by_key() != {}


def test_a_read_at_a_cleaned_away_offset_returns_the_next_batch(log, cleaner) -> None:  # type: ignore
    write_updates(log, updates_over(keys=5, count=200))
    log.roll()
    clean_until_done(cleaner)
    kept = read_all(log).offsets
    gone = [o for o in range(200) if o not in kept]
    assert gone
    for offset in gone:
        header = next(iter(read_all(log, offset).headers))
        first_record = min(o for o in kept if o >= offset)
        assert header.last_offset >= offset and header.base_offset <= first_record


def test_a_batch_losing_its_first_records_keeps_its_offsets_and_timestamps(log, cleaner) -> None:  # type: ignore
    # A batch whose first records are superseded keeps its base offset and timestamps.
    log.append(build_batch([Record(i, DEFAULT_TS + i, b"k%d" % (i % 2), b"v%d" % i)
                            for i in range(6)]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    assert [(r.offset, r.timestamp, r.key) for r in after.records] == \
        [(4, DEFAULT_TS + 4, b"k0"), (5, DEFAULT_TS + 5, b"k1")]
    assert (after.headers[0].base_offset, after.headers[0].last_offset) == (0, 5)
    assert after.headers[0].max_timestamp == DEFAULT_TS + 5


def test_cleaning_survives_reopening_the_log(tmp_path, clock) -> None:  # type: ignore
    data_dir = str(tmp_path / "reopen")
    manager = LogManager(data_dir, default_config=compact_config(), clock=clock)
    log = manager.get_or_create("t", 0)
    updates = updates_over(keys=12, count=300, tombstone_every=5)
    write_updates(log, updates)
    log.roll()
    clean_until_done(LogCleaner(manager, driver=InlineDriver()))
    expected = read_all(log)
    manager.close()
    reopened = LogManager(data_dir, default_config=compact_config(), clock=ManualClock())
    again = read_all(reopened.get("t", 0))  # type: ignore[arg-type]
    assert again.records == expected.records and again.headers == expected.headers
    assert reopened.get("t", 0).log_end_offset == 300  # type: ignore[union-attr]
    reopened.close()
