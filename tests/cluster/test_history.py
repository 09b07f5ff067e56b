"""The history checker on synthetic histories: a clean run passes, and each kind of anomaly —
lost, duplicated, reordered, phantom, offset conflict — is caught and only where it is."""

from __future__ import annotations

import sys
import threading

import pytest

from tests.cluster.history import (
    Conflict,
    Duplicated,
    History,
    Lost,
    Phantom,
    Progress,
    Reordered,
    Report,
    decode_value,
    encode_value,
)


def written(history: History, partition: int, values: list[int], first_offset: int = 0,
            acked: bool = True) -> None:
    """`values` sent to `partition`, (acknowledged and) stored at consecutive offsets."""
    for i, value in enumerate(values):
        history.sent(value, partition)
        if acked:
            history.acked(value, partition, first_offset + i)
        history.final(partition, first_offset + i, value)


def findings(report: Report) -> dict[str, list[object]]:
    return {name: getattr(report, name) for name in
            ("lost", "duplicated", "reordered", "phantom", "conflicts") if getattr(report, name)}


def test_a_clean_history_passes() -> None:
    history = History()
    written(history, 0, [0, 2, 4])
    written(history, 1, [1, 3, 5])
    history.sent(6, 0)
    history.failed(6, "timed out")  # failed and absent: allowed
    history.sent(7, 1)
    history.failed(7, "timed out")  # failed yet written: allowed, once
    history.final(1, 3, 7)
    history.sent(8, 0)  # no outcome, written
    history.final(0, 3, 8)
    for _ in range(2):  # a consumer re-reading
        history.read(0, 1, 2)
        history.read(1, 3, 7)
    report = history.check()
    assert report.ok and findings(report) == {}
    assert report.counts == {"sent": 9, "acked": 6, "failed": 2, "without outcome": 1,
                             "positions read": 2, "final": 8}
    assert "no anomalies" in str(report)


def test_an_acknowledged_record_missing_from_the_final_read_is_lost() -> None:
    history = History()
    written(history, 0, [0, 1])
    history.sent(2, 0)
    history.acked(2, 0, 2)
    history.sent(3, 0)
    history.failed(3, "timed out")  # not acknowledged: may be missing
    assert findings(history.check()) == {"lost": [Lost(2, 0, 2)]}


def test_an_acknowledged_record_found_only_in_another_partition_is_lost_and_a_phantom() -> None:
    history = History()
    history.sent(0, 0)
    history.acked(0, 0, 0)
    history.final(1, 0, 0)
    found = findings(history.check())
    assert found == {"lost": [Lost(0, 0, 0)],
                     "phantom": [Phantom(1, 0, 0, "sent to partition 0")]}


def test_a_value_at_two_offsets_is_duplicated_acked_or_failed() -> None:
    history = History()
    written(history, 0, [0, 1])
    history.final(0, 2, 1)  # a retry written again
    history.sent(2, 0)
    history.failed(2, "timed out")
    history.final(0, 3, 2)
    history.final(0, 4, 2)
    found = findings(history.check())
    assert found == {"duplicated": [Duplicated(1, ((0, 1), (0, 2))),
                                    Duplicated(2, ((0, 3), (0, 4)))]}


def test_records_stored_out_of_send_order_are_reordered() -> None:
    history = History()
    for value in range(4):
        history.sent(value, 0)
    for value, offset in [(0, 0), (2, 1), (1, 2), (3, 3)]:
        history.acked(value, 0, offset)
        history.final(0, offset, value)
    assert findings(history.check()) == {"reordered": [Reordered(0, 1, 2, 2, 1)]}


def test_order_counts_for_records_written_without_an_acknowledgement() -> None:
    # An idempotent producer's batches are written in sequence, acknowledged or not.
    history = History()
    for value in range(3):
        history.sent(value, 0)
    history.acked(0, 0, 0)
    history.failed(1, "timed out")
    history.acked(2, 0, 1)
    history.final(0, 0, 0)
    history.final(0, 1, 2)
    history.final(0, 2, 1)  # the failed one, written after a later one
    assert findings(history.check()) == {"reordered": [Reordered(0, 1, 2, 2, 1)]}


def test_order_is_per_producer_and_per_partition() -> None:
    history = History()
    sends = [("a", "a0", 0), ("b", "b0", 0), ("a", "a1", 1), ("a", "a2", 0), ("b", "b1", 0)]
    for producer, value, partition in sends:
        history.sent(value, partition, producer=producer)
    # Two producers interleave in partition 0 (b0 first): each is in its own send order.
    for partition, offset, value in [(0, 0, "b0"), (0, 1, "a0"), (0, 2, "b1"), (0, 3, "a2"),
                                     (1, 0, "a1")]:
        history.acked(value, partition, offset)
        history.final(partition, offset, value)
    assert history.check().ok
    history.sent("a3", 1, producer="a")
    history.sent("a4", 1, producer="a")
    history.final(1, 1, "a4")
    history.final(1, 2, "a3")
    assert findings(history.check()) == {"reordered": [Reordered(1, "a3", 2, "a4", 1)]}


def test_a_final_record_never_sent_is_a_phantom() -> None:
    history = History()
    written(history, 0, [0])
    history.final(0, 1, b"garbage")
    assert findings(history.check()) == {"phantom": [Phantom(0, 1, b"garbage", "never sent")]}


def test_a_record_read_during_the_run_that_vanished_is_a_phantom() -> None:
    history = History()
    written(history, 0, [0, 1])
    history.sent(2, 0)
    history.failed(2, "timed out")
    history.read(0, 2, 2)  # seen by a consumer, then truncated away
    found = findings(history.check())
    assert found == {"phantom": [Phantom(0, 2, 2, "read, then absent from the final read")]}


def test_a_record_read_at_an_offset_that_later_holds_another_is_a_phantom() -> None:
    history = History()
    written(history, 0, [0])
    history.sent(1, 0)
    history.sent(2, 0)
    history.acked(2, 0, 1)
    history.final(0, 1, 2)
    history.final(0, 2, 1)  # 1 was read at offset 1, which now holds 2
    history.read(0, 1, 1)
    found = findings(history.check())
    assert found["phantom"] == [Phantom(0, 1, 1, "read, then the final read holds 2 there", 2)]
    assert set(found) == {"phantom", "reordered"}


def test_an_acknowledgement_naming_another_records_offset_is_a_conflict() -> None:
    history = History()
    history.sent(0, 0)
    history.sent(1, 0)
    history.acked(0, 0, 0)
    history.acked(1, 0, 0)  # the broker gave two records the same offset
    history.final(0, 0, 0)
    history.final(0, 1, 1)
    (conflict,) = findings(history.check())["conflicts"]
    assert (conflict.value, conflict.partition, conflict.offset) == (1, 0, 0)
    assert "holds 0 there and the value at 0/1" in conflict.why


def test_two_outcomes_for_one_value_are_a_conflict() -> None:
    history = History()
    written(history, 0, [0, 1])
    history.acked(0, 0, 5)
    history.failed(1, "timed out")
    history.acked(9, 0, 2)  # acknowledged, never sent
    found = findings(history.check())
    assert found["conflicts"] == [Conflict(0, 0, 0, "also acked at [(0, 5)]"),
                                  Conflict(1, 0, 1, "also failed: timed out"),
                                  Conflict(9, 0, 2, "never sent")]
    assert found["lost"] == [Lost(9, 0, 2)]


def test_values_must_be_unique_and_final_positions_single() -> None:
    history = History()
    history.sent(0, 0)
    with pytest.raises(ValueError, match="sent twice"):
        history.sent(0, 1)
    history.final(0, 0, 0)
    history.final(0, 0, 0)  # the same record read twice is fine
    with pytest.raises(ValueError, match="two values"):
        history.final(0, 0, 1)


def test_the_report_counts_and_shows_the_first_examples() -> None:
    history = History()
    for value in range(12):
        history.sent(value, 0)
        history.acked(value, 0, value)
    report = history.check()
    text = str(report)
    assert "12 sent, 12 acked" in text and "ANOMALIES" in text
    assert "lost: 12" in text and "... and 7 more" in text
    assert "0 acked at 0/0, not in the final read" in text
    assert "5 acked at 0/5" not in text


def test_recording_from_many_threads_while_checking_loses_nothing() -> None:
    history = History()
    threads, per_thread = 4, 2500
    errors: list[BaseException] = []
    recording = threading.Event()

    def record(base: int) -> None:
        for i in range(per_thread):
            value = base * per_thread + i
            history.sent(value, base)
            history.acked(value, base, i)
            history.read(base, i, value)
            history.final(base, i, value)

    def check_meanwhile() -> None:
        # A check while recording goes on must see a consistent snapshot, not fail.
        while recording.is_set():
            try:
                history.check()
            except BaseException as exc:
                errors.append(exc)
                return

    writers = [threading.Thread(target=record, args=(t,)) for t in range(threads)]
    checker = threading.Thread(target=check_meanwhile)
    recording.set()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, as a loaded machine would
    try:
        for thread in [*writers, checker]:
            thread.start()
        for writer in writers:
            writer.join()
    finally:
        sys.setswitchinterval(interval)
        recording.clear()
        checker.join()
    assert errors == []
    report = history.check()
    assert report.ok, str(report)
    total = threads * per_thread
    assert report.counts["sent"] == report.counts["final"] == total
    assert report.counts["positions read"] == total


def test_values_round_trip_through_record_bytes() -> None:
    raw = encode_value(42, 100)
    assert len(raw) == 100 and decode_value(raw) == 42
    assert decode_value(encode_value(7, 4)) == 7  # never shorter than the number
    assert decode_value(b"not a number at all") == b"not a number at all"
    assert decode_value(None) is None


def test_progress_times_the_first_value_at_or_past_a_threshold() -> None:
    progress = Progress()
    progress.advance(3)
    progress.watch(5)
    assert progress.reached(5, timeout_s=0.01) is None
    progress.advance(4)
    assert progress.reached(5, timeout_s=0.01) is None
    waiter = threading.Thread(target=progress.advance, args=(7,))
    waiter.start()
    at = progress.reached(5, timeout_s=10)
    waiter.join()
    assert at is not None
    progress.advance(9)
    assert progress.reached(5, timeout_s=0) == at  # the first time, not the latest
    progress.watch(2)  # already passed when watched
    assert progress.reached(2, timeout_s=0) is not None
    assert progress.highest == 9
