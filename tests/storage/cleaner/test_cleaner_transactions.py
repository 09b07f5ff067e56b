"""Compaction of transactional data with TransactionalBatchPolicy (ManualClock): aborted records
are removed and never shadow committed ones, markers stay while their transaction has data and
go one delete horizon after, active producers keep their last batch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.cleaner.cleaner_transactions import TRANSACTIONAL_BATCH_POLICY
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

from ..batches import DEFAULT_TS
from ..cleaner_support import clean_until_done, compact_config, keyed_batch, read_all, write_updates

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
    c = LogCleaner(manager, batch_policy=TRANSACTIONAL_BATCH_POLICY)
    yield c
    c.driver.close()


@pytest.fixture
def log(manager: LogManager) -> PartitionLog:
    return manager.get_or_create("t", 0)


def txn(log: PartitionLog, pid: int, updates: list[tuple[bytes, bytes]], commit: bool,
        seq: int = 0) -> tuple[int, int]:
    """A transaction of `pid`; (offset of its data batch, offset of its marker)."""
    data = log.append(keyed_batch(updates, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                  transactional=True), leader_epoch=0).first_offset
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    marker = log.append(build_end_transaction_batch(EndTransactionMarker(kind, 0),
                                                    producer_id=pid, producer_epoch=0,
                                                    timestamp=DEFAULT_TS),
                        leader_epoch=0, origin=AppendOrigin.COORDINATOR).first_offset
    log.update_high_watermark(log.log_end_offset)
    return data, marker


def data_by_key(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    """The latest value of each key in data batches (markers' records left out)."""
    after = read_all(log)
    control = [(h.base_offset, h.last_offset) for h in after.headers if h.is_control]
    return {r.key: r.value for r in after.records
            if not any(lo <= r.offset <= hi for lo, hi in control)}


def markers(log: PartitionLog) -> list[int]:
    return [h.base_offset for h in read_all(log).headers if h.is_control and h.records_count]


def round_after(log: PartitionLog, cleaner: LogCleaner) -> None:
    """Something new and rolled, so there is a dirty section, then clean."""
    write_updates(log, [(b"filler", b"x")])
    log.roll()
    clean_until_done(cleaner)


def test_aborted_records_are_removed_and_do_not_shadow_committed_ones(log, cleaner) -> None:  # type: ignore
    write_updates(log, [(b"a", b"committed-before")])
    _, abort = txn(log, 5, [(b"a", b"aborted"), (b"b", b"aborted")], commit=False)
    txn(log, 6, [(b"c", b"committed")], commit=True)
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    assert data_by_key(log) == {b"a": b"committed-before", b"c": b"committed"}
    aborted_batches = [h for h in after.headers if h.producer_id == 5 and not h.is_control]
    assert [h.records_count for h in aborted_batches] == [0]  # kept empty: producer state
    assert abort in markers(log)  # its transaction still has a batch in the log
    assert [t.last_offset for t in log.aborted_transactions(0, log.log_end_offset)] == [abort]


def test_markers_go_a_delete_horizon_after_their_transaction_is_gone(log, cleaner, clock  # type: ignore
                                                                     ) -> None:
    _, abort = txn(log, 5, [(b"a", b"aborted")], commit=False)
    _, commit = txn(log, 6, [(b"b", b"old")], commit=True)
    write_updates(log, [(b"b", b"new")])
    log.roll()
    clock.advance(1)
    log.remove_expired_producers(1)  # the producers are gone: their batches may go too
    clean_until_done(cleaner)
    assert data_by_key(log) == {b"b": b"new"}
    assert markers(log) == [abort, commit]  # their batches were still there this round
    round_after(log, cleaner)
    kept = [h for h in read_all(log).headers if h.is_control and h.records_count]
    assert [h.base_offset for h in kept] == [abort, commit]
    assert all(h.has_delete_horizon for h in kept)
    clock.advance(RETENTION_MS)
    round_after(log, cleaner)
    assert markers(log) == []
    assert log.aborted_transactions(0, log.log_end_offset) == []


def test_an_active_producers_last_batch_and_marker_are_kept(log, cleaner) -> None:  # type: ignore
    txn(log, 7, [(b"k", b"v1")], commit=True)
    data, commit = txn(log, 7, [(b"k", b"v2")], commit=True, seq=1)
    write_updates(log, [(b"k", b"v3")])
    log.roll()
    clean_until_done(cleaner)
    after = read_all(log)
    assert data_by_key(log) == {b"k": b"v3"}
    kept = [(h.base_offset, h.base_sequence) for h in after.headers
            if h.producer_id == 7 and not h.is_control]
    assert kept == [(data, 1)]  # the batch with the last sequence, emptied
    assert commit in markers(log)
