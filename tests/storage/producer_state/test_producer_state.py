"""Producer state through PartitionLog: idempotence, epochs, transactions, the LSO, the
transaction index, snapshots and recovery, expiry — with a ManualClock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_log.clock import ManualClock
from spark_log.records.batch_header import CONTROL_BIT, TRANSACTIONAL_BIT, iter_headers
from spark_log.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from spark_log.storage.log.file_records import EMPTY_SLICE, slice_next_offset
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.producer_state.producer_snapshot import decode, encode, list_snapshots
from spark_log.storage.producer_state.producer_state_entry import BatchMetadata, ProducerStateEntry

from ..batches import DEFAULT_TS, make_batch
from ..conftest import open_log, small_config

PID = 42


def produce(log: PartitionLog, seq: int, records: int = 1, *, pid: int = PID, epoch: int = 0,
            txn: bool = False, ts: int = DEFAULT_TS) -> tuple[int, int]:
    info = log.append(make_batch(records, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, timestamp=ts,
                                 attributes=TRANSACTIONAL_BIT if txn else 0),
                      leader_epoch=0)
    return info.first_offset, info.last_offset


def marker(log: PartitionLog, commit: bool, *, pid: int = PID, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_end_transaction_batch(EndTransactionMarker(kind, coordinator_epoch),
                                        producer_id=pid, producer_epoch=epoch,
                                        timestamp=DEFAULT_TS)
    return log.append(batch, leader_epoch=0, origin=AppendOrigin.COORDINATOR).first_offset


@pytest.fixture
def log(tmp_path, clock, config) -> PartitionLog:  # type: ignore[no-untyped-def]
    return open_log(tmp_path, config, clock)


def test_a_retry_of_any_of_the_last_five_batches_gets_its_original_offsets(log) -> None:  # type: ignore
    offsets = [produce(log, seq * 2, 2) for seq in range(6)]
    end = log.log_end_offset
    for seq in range(1, 6):
        assert produce(log, seq * 2, 2) == offsets[seq]
    assert log.log_end_offset == end  # nothing written again
    with pytest.raises(OutOfOrderSequenceError):  # the sixth-newest is forgotten
        produce(log, 0, 2)


def test_a_gap_in_sequences_is_out_of_order(log) -> None:  # type: ignore
    produce(log, 0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 4)
    assert produce(log, 3) == (3, 3)


def test_an_unknown_producer_may_start_at_any_sequence(log) -> None:  # type: ignore
    assert produce(log, 17) == (0, 0)
    assert produce(log, 18) == (1, 1)


def test_sequences_wrap_at_two_to_the_31(log) -> None:  # type: ignore
    produce(log, 2**31 - 2, 2)
    assert produce(log, 0, 1) == (2, 2)


def test_a_batch_spanning_the_wrap_is_recognised_as_a_duplicate(log) -> None:  # type: ignore
    first = produce(log, 2**31 - 1, 3)  # sequences 2^31-1, 0, 1
    assert produce(log, 2**31 - 1, 3) == first
    assert produce(log, 2) == (3, 3)


def test_stale_epoch_is_invalid_and_new_epoch_must_start_at_zero(log) -> None:  # type: ignore
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 1, epoch=2)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5, epoch=4)
    assert produce(log, 0, epoch=4) == (1, 1)


def test_producer_state_survives_a_clean_restart(tmp_path, clock, config) -> None:  # type: ignore
    log = open_log(tmp_path, config, clock)
    first = produce(log, 0, 2)
    log.close()
    assert list_snapshots(log.dir) == [2]
    reopened = open_log(tmp_path, config, clock, had_clean_shutdown=True)
    assert produce(reopened, 0, 2) == first  # still a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, 5)


def test_producer_state_is_rebuilt_after_a_crash(tmp_path, clock) -> None:  # type: ignore
    config = small_config(**{"internal.segment.bytes": "1024"})
    log = open_log(tmp_path, config, clock)
    for seq in range(40):
        produce(log, seq)
    assert len(log.segments) > 2 and len(list_snapshots(log.dir)) > 1  # one per roll
    log.release()  # a crash: no close, no final snapshot
    reopened = open_log(tmp_path, config, clock, recovery_point=0)
    assert produce(reopened, 39) == (39, 39)
    assert produce(reopened, 40) == (40, 40)


def test_recovery_keeps_the_snapshots_the_recovered_log_still_holds(  # type: ignore
        tmp_path, clock, config) -> None:
    log = open_log(tmp_path, config, clock)
    produce(log, 0, 2)
    log.close()  # a snapshot at 2, the log end, and the recovery point
    reopened = open_log(tmp_path, config, clock, recovery_point=2, had_clean_shutdown=True)
    produce(reopened, 2, 3)
    reopened.release()  # a crash: the active segment is recovered from its base, offset 0
    recovered = open_log(tmp_path, config, clock, recovery_point=2)
    assert list_snapshots(recovered.dir) == [2]
    assert produce(recovered, 2, 3) == (2, 4)  # a duplicate: replayed past the snapshot
    assert produce(recovered, 5) == (5, 5)


def test_recovery_deletes_the_snapshots_above_where_it_cut_the_log(tmp_path, clock) -> None:  # type: ignore
    config = small_config(**{"internal.segment.bytes": "1024"})
    log = open_log(tmp_path, config, clock)
    for seq in range(40):
        produce(log, seq)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3 and list_snapshots(log.dir) == bases[1:]  # one per roll
    log.release()
    path = os.path.join(log.dir, f"{bases[1]:020d}.log")
    with open(path, "rb") as f:
        positions = [pos for pos, _ in iter_headers(f.read(), 0)]
    with open(path, "r+b") as f:  # the third batch of the second segment fails its CRC
        f.seek(positions[2] + 70)
        f.write(b"\xff")
    recovered = open_log(tmp_path, config, clock, recovery_point=0)
    assert recovered.log_end_offset == bases[1] + 2
    assert list_snapshots(recovered.dir) == [bases[1]]
    assert produce(recovered, bases[1] + 2) == (bases[1] + 2, bases[1] + 2)


def test_a_damaged_snapshot_is_deleted_and_the_state_rebuilt_from_the_log(  # type: ignore
        tmp_path, clock, config, caplog) -> None:
    log = open_log(tmp_path, config, clock)
    produce(log, 0)
    before = [(p.producer_id, p.producer_epoch, list(p.batches)) for p in log.active_producers()]
    log.close()
    path = os.path.join(log.dir, "00000000000000000001.snapshot")
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    reopened = open_log(tmp_path, config, clock, had_clean_shutdown=True)
    # not forgotten (its next sequence would be refused): replayed from the log
    after = [(p.producer_id, p.producer_epoch, list(p.batches))
             for p in reopened.active_producers()]
    assert before and after == before
    assert "unreadable producer snapshot" in caplog.text
    assert not os.path.exists(path)


def test_snapshot_round_trip_keeps_the_last_batch() -> None:
    entry = ProducerStateEntry(7, 2, coordinator_epoch=5, last_timestamp=99,
                               current_txn_first_offset=10)
    entry.batches.extend([BatchMetadata(4, 20, 1, 98), BatchMetadata(6, 22, 1, 99)])
    (back,) = decode(encode([entry]))
    assert (back.producer_id, back.producer_epoch, back.coordinator_epoch,
            back.current_txn_first_offset) == (7, 2, 5, 10)
    assert list(back.batches) == [BatchMetadata(6, 22, 1, 99)]


def test_old_snapshots_go_with_their_segments(tmp_path, clock) -> None:  # type: ignore
    config = small_config(**{"internal.segment.bytes": "1024"})
    log = open_log(tmp_path, config, clock)
    for seq in range(40):
        produce(log, seq)
    log.update_high_watermark(log.log_end_offset)
    start = log.delete_records_before(log.segments[-1].base_offset)
    assert min(list_snapshots(log.dir)) >= start


def test_open_transaction_holds_the_lso_until_its_marker(log) -> None:  # type: ignore
    produce(log, 0, pid=1)
    first, _ = produce(log, 0, 2, pid=PID, txn=True)
    produce(log, 1, pid=1)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == first
    end = marker(log, commit=True)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.high_watermark == end + 1
    assert log.aborted_transactions(0, end + 1) == []


def test_aborted_transactions_are_indexed_with_their_lso(log) -> None:  # type: ignore
    a_first, _ = produce(log, 0, pid=1, txn=True)
    b_first, _ = produce(log, 0, pid=2, txn=True)
    a_end = marker(log, commit=False, pid=1)
    b_end = marker(log, commit=False, pid=2)
    found = log.aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in found] == [(1, a_first, a_end, b_first), (2, b_first, b_end, b_end + 1)]
    assert log.aborted_transactions(b_end + 1, b_end + 2) == []
    assert [t.producer_id for t in log.aborted_transactions(a_end + 1, b_end + 1)] == [2]


def test_transaction_index_is_rebuilt_after_a_crash(tmp_path, clock, config) -> None:  # type: ignore
    log = open_log(tmp_path, config, clock)
    produce(log, 0, txn=True)
    end = marker(log, commit=False)
    produce(log, 1, pid=7, txn=True)  # still open at the crash
    txnindex = os.path.join(log.dir, "00000000000000000000.txnindex")
    log.release()
    os.remove(txnindex)
    reopened = open_log(tmp_path, config, clock, recovery_point=0)
    assert [(t.producer_id, t.last_offset) for t in
            reopened.aborted_transactions(0, reopened.log_end_offset)] == [(PID, end)]
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == end + 1


@pytest.mark.parametrize("damage", [b"\x07" * 5, b"\x00" * 34, b"\x00\x09" + b"\x00" * 32])
def test_a_damaged_transaction_index_is_rebuilt_from_the_log_after_a_clean_shutdown(  # type: ignore
        tmp_path, clock, config, damage, caplog) -> None:
    log = open_log(tmp_path, config, clock)
    produce(log, 0, txn=True)
    first_end = marker(log, commit=False)
    produce(log, 0, pid=7, txn=True)
    second_end = marker(log, commit=False, pid=7)
    before = log.aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.last_offset) for t in before] == [(PID, first_end), (7, second_end)]
    txnindex = os.path.join(log.dir, "00000000000000000000.txnindex")
    sound = Path(txnindex).read_bytes()
    log.close()
    with open(txnindex, "ab") as f:  # a torn entry, an entry out of order, an unknown version
        f.write(damage)
    reopened = open_log(tmp_path, config, clock, had_clean_shutdown=True)
    assert "txnindex" in caplog.text and "recovering from that segment on" in caplog.text
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == before
    assert Path(txnindex).read_bytes() == sound


def test_non_transactional_write_inside_a_transaction_is_refused(log) -> None:  # type: ignore
    produce(log, 0, txn=True)
    with pytest.raises(InvalidTxnStateError):
        produce(log, 1)


def test_markers_from_an_old_coordinator_epoch_are_fenced(log) -> None:  # type: ignore
    produce(log, 0, txn=True)
    marker(log, commit=True, coordinator_epoch=3)
    produce(log, 1, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, commit=False, coordinator_epoch=2)


def test_a_marker_with_a_bumped_epoch_fences_the_old_epoch(log) -> None:  # type: ignore
    produce(log, 0, txn=True)
    marker(log, commit=False, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 1, txn=True)
    assert produce(log, 0, epoch=1, txn=True)[0] == 2


def test_clients_cannot_write_markers(log) -> None:  # type: ignore
    batch = make_batch(1, producer_id=PID, producer_epoch=0,
                       attributes=CONTROL_BIT | TRANSACTIONAL_BIT)
    with pytest.raises(InvalidRecordError):
        log.append(batch, leader_epoch=0)


def test_idle_producers_expire_but_not_inside_a_transaction(tmp_path) -> None:  # type: ignore
    clock = ManualClock(DEFAULT_TS)
    log = open_log(tmp_path, LogConfig.from_properties({}), clock)
    produce(log, 0, pid=1)
    produce(log, 0, pid=2, txn=True)
    clock.advance(1000)
    assert log.remove_expired_producers(1000) == 1
    assert [e.producer_id for e in log.active_producers()] == [2]
    assert produce(log, 5, pid=1)  # unknown again: any sequence is accepted


def test_a_fetch_slice_knows_the_offset_after_its_last_batch(log) -> None:  # type: ignore
    for seq in range(0, 40, 4):
        produce(log, seq, 4)
    part = log.read(13, 300)  # from the batch holding 13, whole batches within 300 bytes
    headers = [h for _, h in iter_headers(part.read_bytes())]
    assert 1 < len(headers) < 10
    assert slice_next_offset(part) == headers[-1].next_offset
    assert slice_next_offset(log.read(0, 10**6)) == log.log_end_offset == 40
    assert slice_next_offset(EMPTY_SLICE) is None


def test_an_aborted_transaction_spanning_segments_is_found_from_its_first_one(tmp_path, clock  # type: ignore
                                                                            ) -> None:
    log = open_log(tmp_path, small_config(**{"internal.segment.bytes": "1024"}), clock)
    first, _ = produce(log, 0, txn=True)
    for seq in range(1, 30):
        produce(log, seq, txn=True)
        produce(log, seq - 1, pid=7)  # interleaved plain data from another producer
    end = marker(log, commit=False)
    assert len(log.segments) > 2
    found = log.aborted_transactions(first + 1, first + 2)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in found] == \
        [(PID, first, end)]
    assert log.aborted_transactions(end + 1, end + 2) == []
