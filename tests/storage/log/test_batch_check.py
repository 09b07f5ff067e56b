"""Damage that start-up did not check is found by the first read that reaches it: the data
directory goes offline, the next start recovers the damaged segment; a wrong index entry is only
an index to rebuild."""

from __future__ import annotations

import ast
import itertools
import logging
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.storage.checkpoint import OffsetCheckpointFile
from spark_log.storage.errors import KafkaStorageError
from spark_log.storage.log.batch_check import CheckedRanges, check_ahead, check_batches
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.segment import Segment

from ..batches import flip_byte, make_batch
from ..conftest import small_config


def test_checked_ranges_merge_and_report_gaps() -> None:
    ranges = CheckedRanges()
    assert ranges.gaps(0, 100) == [(0, 100)]
    ranges.add(10, 20)
    ranges.add(40, 50)
    assert ranges.gaps(0, 60) == [(0, 10), (20, 40), (50, 60)]
    assert ranges.gaps(12, 18) == [] and ranges.gaps(15, 45) == [(20, 40)]
    ranges.add(20, 40)  # touching both: one range
    assert repr(ranges) == "CheckedRanges([(10, 50)])"
    ranges.add(5, 60)
    assert ranges.gaps(0, 70) == [(0, 5), (60, 70)]
    ranges.truncate(30)
    assert ranges.gaps(0, 40) == [(0, 5), (30, 40)]
    ranges.clear()
    assert ranges.gaps(1, 2) == [(1, 2)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12))
def test_checked_ranges_hold_what_was_added_as_a_set_of_bytes_would(adds) -> None:
    ranges, model = CheckedRanges(), set()
    for start, length in adds:
        ranges.add(start, start + length)
        model.update(range(start, start + length))
        gaps: list[tuple[int, int]] = []
        for b in (b for b in range(90) if b not in model):
            if gaps and gaps[-1][1] == b:
                gaps[-1] = (gaps[-1][0], b + 1)
            else:
                gaps.append((b, b + 1))
        assert ranges.gaps(0, 90) == gaps
        held = ast.literal_eval(repr(ranges)[len("CheckedRanges("):-1])
        assert all(end < start for (_, end), (start, _) in itertools.pairwise(held))


def test_check_batches_names_the_first_bad_batch() -> None:
    batches = [make_batch(2, base_offset=10 + 2 * i) for i in range(3)]
    data = bytearray(b"".join(batches))
    assert check_batches(data, 0, len(data), base_offset=10).base_offset == 14  # type: ignore
    with pytest.raises(Exception, match="below the segment's base offset"):
        check_batches(data, 0, len(data), base_offset=11)
    with pytest.raises(Exception, match="not below the next segment's base offset 15"):
        check_batches(data, 0, len(data), base_offset=10, limit_offset=15)
    data[len(batches[0]) + 70] ^= 0xFF
    with pytest.raises(Exception, match=f"batch at byte {len(batches[0])} .*CRC mismatch"):
        check_batches(data, 0, len(data), base_offset=10)


def test_check_ahead_stops_quietly_before_a_bad_or_cut_batch() -> None:
    batches = [make_batch(2, base_offset=10 + 2 * i) for i in range(4)]
    data = bytearray(b"".join(batches))
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(4)]
    assert check_ahead(data, 0, len(data), base_offset=10, next_offset=10) == ends[3]
    assert check_ahead(data, ends[0], ends[2] + 5, base_offset=10, next_offset=12) == ends[2]
    # offsets must go on from the batch before the start
    assert check_ahead(data, ends[0], len(data), base_offset=10, next_offset=13) == ends[0]
    assert check_ahead(data, 0, len(data), base_offset=10, next_offset=10,
                       limit_offset=15) == ends[1]
    data[ends[1] + 70] ^= 0xFF  # the third batch's CRC
    assert check_ahead(data, 0, len(data), base_offset=10, next_offset=10) == ends[1]
    assert check_ahead(data[: ends[0] + 30], 0, len(data), base_offset=10,
                       next_offset=10) == ends[0]


def manager(data_dir, clock, **kw) -> LogManager:  # type: ignore[no-untyped-def]
    return LogManager(str(data_dir), default_config=small_config(), clock=clock, **kw)


def filled(data_dir, clock, batches: int = 60) -> list[Segment]:  # type: ignore[no-untyped-def]
    """A log of several segments, closed cleanly; its segments as they were."""
    m = manager(data_dir, clock)
    log = m.get_or_create("t", 0)
    for i in range(batches):
        log.append(make_batch(2, value_size=60, timestamp=clock.now_ms() + i), leader_epoch=0)
    segments = log.segments
    m.close()
    return segments


def offsets_read(log, start: int = 0) -> list[int]:  # type: ignore[no-untyped-def]
    """Base offsets of every batch served from `start` on."""
    from spark_log.records.batch_header import iter_headers

    out, offset = [], start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        headers = [h for _, h in iter_headers(data)]
        if not headers:
            break
        out += [h.base_offset for h in headers]
        offset = headers[-1].next_offset
    return out


def test_a_bad_crc_found_by_a_read_takes_the_directory_offline_and_the_restart_recovers(
        tmp_path, clock, caplog) -> None:  # type: ignore[no-untyped-def]
    segments = filled(tmp_path, clock)
    second = segments[1]
    batch = os.path.getsize(second.log.path) // 20  # 20 batches of one size
    flip_byte(second.log.path, 3 * batch + 90)  # a record of the 4th batch, far from the tail
    m = manager(tmp_path, clock)
    log = m.get("t", 0)
    assert log is not None and log.log_end_offset == 120  # start-up saw nothing wrong
    assert len(log.read(0, 1 << 20).read_bytes()) == segments[0].size  # the first segment
    with caplog.at_level(logging.WARNING), pytest.raises(KafkaStorageError, match="CRC"):
        log.read(second.base_offset, 1 << 20)
    assert m.failure.failed and "is offline" in caplog.text
    with pytest.raises(KafkaStorageError):  # every partition of the directory
        log.read(0, 100)
    # the recovery point dropped to the damaged segment, for the next start
    saved = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read()
    assert saved[("t", 0)] == second.base_offset
    m.close()  # after a failure: no clean-shutdown marker
    assert not (tmp_path / ".kafka_cleanshutdown").exists()

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = manager(tmp_path, clock)
    log = again.get("t", 0)
    assert log is not None and not again.failure.failed
    assert f"{second.log.path} is damaged at byte" in caplog.text
    served = offsets_read(log, 0)
    assert served == list(range(0, served[-1] + 1, 2))  # contiguous, up to the damage
    assert second.base_offset < log.log_end_offset < 120
    kept = [n for n in os.listdir(log.dir) if ".damaged-" in n]
    assert len(kept) == 1 + len(segments) - 2  # the rest of the second, and the third segment
    log.append(make_batch(2), leader_epoch=0)  # and it takes new writes
    assert offsets_read(log, served[-1] + 2) == [served[-1] + 2]


def test_a_read_checks_ahead_so_reading_back_maps_the_file_once_a_window(
        tmp_path, clock) -> None:  # type: ignore[no-untyped-def]
    segments = filled(tmp_path, clock)
    second = segments[1]
    batch = os.path.getsize(second.log.path) // 20
    m = manager(tmp_path, clock)
    log = m.get("t", 0)
    segment = log.segments[1]
    assert segment.checked.gaps(0, segment.size) == [(0, segment.size)]  # not the tail's
    log.read(second.base_offset, 1)  # one batch, and the rest of the segment ahead of it
    assert segment.checked.gaps(0, segment.size) == []
    m.close()

    flip_byte(second.log.path, 5 * batch + 90)  # the 6th batch
    m = manager(tmp_path, clock)
    log = m.get("t", 0)
    segment = log.segments[1]
    for offset in range(second.base_offset, second.base_offset + 10, 2):  # batches 1-5 pass
        assert log.read(offset, 1).read_bytes()[:8] == struct.pack(">q", offset)
    assert segment.checked.gaps(0, segment.size) == [(5 * batch, segment.size)]
    assert not m.failure.failed
    with pytest.raises(KafkaStorageError, match="CRC"):  # the read that reaches it reports it
        log.read(second.base_offset + 10, 1)
    m.close()


def test_a_wrong_index_entry_is_rebuilt_not_taken_for_damage(tmp_path, clock, caplog  # type: ignore
                                                             ) -> None:
    segments = filled(tmp_path, clock)
    index = segments[0].log.path[:-4] + ".index"
    with open(index, "r+b") as f:  # the second entry now points into the middle of a batch
        f.seek(8)
        relative, position = struct.unpack(">ii", f.read(8))
        f.seek(8)
        f.write(struct.pack(">ii", relative, position + 7))
    m = manager(tmp_path, clock)
    log = m.get("t", 0)
    with caplog.at_level(logging.WARNING):  # backwards: each read starts at an index lookup
        firsts = [log.read(o, 1).read_bytes()[:8] for o in range(118, -1, -2)]  # type: ignore
    assert [struct.unpack(">q", f)[0] for f in firsts] == list(range(118, -1, -2))
    assert not m.failure.failed
    assert "rebuilding the indexes of that segment and reading again" in caplog.text


def test_a_first_batch_below_the_segment_base_offset_is_damage(tmp_path, clock) -> None:  # type: ignore
    segments = filled(tmp_path, clock)
    last = segments[-1].log.path
    renamed = os.path.join(os.path.dirname(last), f"{segments[-1].base_offset + 5:020d}.log")
    os.rename(last, renamed)
    for suffix in (".index", ".timeindex"):
        os.remove(last[:-4] + suffix)
    m = manager(tmp_path, clock)  # the active segment's first batch is checked at start
    log = m.get("t", 0)
    # its batches are kept aside and the emptied segment removed: the log ends where the
    # previous segment does, with no gap consumers would wait on
    assert log is not None and log.log_end_offset == segments[-1].base_offset == 80
    assert not m.failure.failed and offsets_read(log) == list(range(0, 80, 2))
    assert not os.path.exists(renamed)
    kept = [n for n in os.listdir(log.dir) if ".damaged-" in n]
    assert kept and kept[0].startswith(f"{segments[-1].base_offset + 5:020d}")


def test_internal_topics_are_checked_whole_at_every_start(tmp_path, clock, caplog) -> None:  # type: ignore
    m = manager(tmp_path, clock)
    for topic in ("t", "__consumer_offsets"):
        log = m.get_or_create(topic, 0)
        for i in range(60):
            log.append(make_batch(2, value_size=60, timestamp=clock.now_ms() + i),
                       leader_epoch=0)
    first_segments = {t: m.get(t, 0).segments[0].log.path for t in ("t", "__consumer_offsets")}  # type: ignore
    m.close()
    for path in first_segments.values():
        flip_byte(path, 600)
    with caplog.at_level(logging.WARNING):
        again = manager(tmp_path, clock, checked_at_start=frozenset({"__consumer_offsets"}))
    # recovered at start (not found later by a read that would take everything offline)...
    assert f"{first_segments['__consumer_offsets']} is damaged" in caplog.text
    assert again.get("__consumer_offsets", 0).log_end_offset < 120  # type: ignore[union-attr]
    # ...while an ordinary topic is only checked when read
    assert first_segments["t"] not in caplog.text
    assert again.get("t", 0).log_end_offset == 120  # type: ignore[union-attr]
