from __future__ import annotations

import logging
import os
import struct

import pytest

from spark_log.clock import ManualClock
from spark_log.records.batch_header import read_header
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.segment import Segment, segment_file_name
from spark_log.storage.log.timestamp_search import HEADER_ONLY

from ..batches import DEFAULT_TS, make_batch
from ..conftest import CountingFileSystem, small_config


def new_segment(tmp_path, clock: ManualClock, config: LogConfig | None = None,  # type: ignore
                base: int = 100, **kw: object) -> Segment:
    return Segment(str(tmp_path), base, config or small_config(), clock=clock, active=True,
                   create=True, **kw)  # type: ignore[arg-type]


def fill(segment: Segment, count: int, size: int = 200, records: int = 2,
         ts: int = DEFAULT_TS) -> list[bytes]:
    """Append `count` batches of `size` bytes and `records` records each, one at a time."""
    written = []
    offset = segment.read_next_offset()
    for i in range(count):
        one = make_batch(records, base_offset=offset, timestamp=ts + i,
                         value_size=max(0, size // records - 20))
        segment.append([one], [read_header(one)])
        written.append(one)
        offset += records
    return written


def test_file_names_are_the_base_offset_in_20_digits(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock, base=1234)
    assert segment_file_name(1234, ".log") == "00000000000000001234.log"
    assert sorted(os.listdir(tmp_path)) == ["00000000000000001234.index",
                                            "00000000000000001234.log",
                                            "00000000000000001234.timeindex"]
    assert s.read_next_offset() == 1234


def test_read_returns_whole_batches_from_the_one_holding_the_offset(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    batches = fill(s, 10)
    data = b"".join(batches)
    one = len(batches[0])
    inside = s.read(105, 10_000)  # offset 105 is the 2nd record of the 3rd batch
    assert inside.position == 2 * one and inside.read_bytes() == data[2 * one:]
    capped = s.read(100, 3 * one + one // 2)
    assert capped.read_bytes() == data[: 3 * one]
    assert s.read(100, 0).read_bytes() == batches[0]  # min_one_batch
    assert s.read(100, 0, min_one_batch=False).size == 0
    assert s.read(100, 10_000, max_offset=104).read_bytes() == data[: 2 * one]
    assert s.read(120, 100) is None


def test_sparse_index_every_interval_bytes(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock, small_config(**{"index.interval.bytes": "500"}))
    batches = fill(s, 12)
    one = len(batches[0])
    entries = [s.offset_index.entry(i) for i in range(s.offset_index.entries)]
    # an entry once more than 500 bytes were written since the last: every 3rd batch
    assert [e.position for e in entries] == [3 * one, 6 * one, 9 * one]
    assert [e.offset for e in entries] == [107, 113, 119]
    assert s.translate_offset(115) == (7 * one, read_header(batches[7]))


def test_max_timestamp_and_its_offset(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    for off, ts in [(100, 50), (101, 90), (102, 70)]:
        b = make_batch(1, base_offset=off, timestamp=ts)
        s.append([b], [read_header(b)])
    assert tuple(s.max_timestamp_so_far()) == (90, 101)
    assert s.largest_timestamp() == 90
    assert s.offset_of_max_timestamp(HEADER_ONLY).offset == 101
    found = s.find_offset_by_timestamp(60, 0, HEADER_ONLY)
    assert (found.offset, found.timestamp) == (101, 90)
    assert s.find_offset_by_timestamp(91, 0, HEADER_ONLY) is None


def test_largest_timestamp_falls_back_to_mtime(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    b = make_batch(1, base_offset=100, timestamp=-1)
    s.append([b], [read_header(b)])
    os.utime(s.log.path, ns=(5_000_000_000, 5_000_000_000))
    assert s.largest_timestamp() == 5000


def test_should_roll_on_size_time_index_and_offset_overflow(tmp_path, clock) -> None:  # type: ignore
    config = small_config(**{"segment.ms": "1000"})
    s = new_segment(tmp_path, clock, config)
    kw = {"max_timestamp": DEFAULT_TS, "max_offset": 100, "now_ms": clock.now_ms()}
    assert not s.should_roll(messages_size=4096, **kw)  # empty segment takes a full append
    fill(s, 1, ts=DEFAULT_TS)
    assert s.should_roll(messages_size=4096 - s.size + 1, **kw)
    assert not s.should_roll(messages_size=100, **kw)
    # age is measured from the first batch's timestamp to the new batch's
    assert not s.should_roll(messages_size=100, **{**kw, "max_timestamp": DEFAULT_TS + 1000})
    assert s.should_roll(messages_size=100, **{**kw, "max_timestamp": DEFAULT_TS + 1001})
    assert s.should_roll(messages_size=100, **{**kw, "max_offset": 100 + 2**31})


def test_should_roll_by_wall_clock_without_timestamps(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock, small_config(**{"segment.ms": "1000"}))
    b = make_batch(1, base_offset=100, timestamp=-1)
    s.append([b], [read_header(b)])
    kw = {"messages_size": 10, "max_timestamp": -1, "max_offset": 101}
    assert not s.should_roll(now_ms=clock.now_ms() + 1000, **kw)
    assert s.should_roll(now_ms=clock.now_ms() + 1001, **kw)


def test_full_index_rolls(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock, small_config(**{"segment.index.bytes": "24",
                                                     "index.interval.bytes": "0"}))
    fill(s, 2)
    kw = {"messages_size": 1, "max_timestamp": 0, "max_offset": 104, "now_ms": 0}
    # 24 bytes hold 3 offset entries but 2 time entries, the last kept for the roll
    assert (s.offset_index.entries, s.time_index.entries) == (1, 1)
    assert s.time_index.is_full and not s.offset_index.is_full
    assert s.should_roll(**kw)
    s.offset_index.append(110, s.size)
    s.offset_index.append(111, s.size + 1)
    assert s.offset_index.is_full


def test_recover_truncates_garbage_and_rebuilds_indexes(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    fill(s, 12)
    good_size = s.size
    built = [s.offset_index.entry(i) for i in range(s.offset_index.entries)]
    s.close()
    with open(s.log.path, "ab") as f:
        f.write(b"\x07" * 100)
    reopened = Segment(str(tmp_path), 100, small_config(), clock=clock, active=True)
    next_offset, damage = reopened.recover()
    assert damage is not None and damage.position == good_size and not damage.whole_batch
    assert next_offset == 124
    assert "magic 7" in damage.reason
    assert reopened.cut(damage.position, None) == 100
    assert reopened.size == os.path.getsize(reopened.log.path) == good_size
    assert [reopened.offset_index.entry(i) for i in range(reopened.offset_index.entries)] == built
    assert reopened.read_next_offset() == 124


def test_recover_stops_at_a_bad_crc(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    batches = fill(s, 5)
    s.close()
    with open(s.log.path, "r+b") as f:  # flip a payload byte of the 4th batch
        f.seek(3 * len(batches[0]) + 70)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    reopened = Segment(str(tmp_path), 100, small_config(), clock=clock, active=True)
    next_offset, damage = reopened.recover()
    assert damage is not None and damage.position == 3 * len(batches[0]) and next_offset == 106
    assert "CRC mismatch" in damage.reason and damage.whole_batch and damage.last_offset == 107
    kept = tmp_path / "kept.log"
    assert reopened.cut(damage.position, str(kept)) == 2 * len(batches[0])
    assert kept.read_bytes()[len(batches[0]):] == batches[4]  # the cut bytes, kept whole
    assert reopened.read_next_offset() == 106


def test_indexes_are_loaded_lazily_and_checked(tmp_path, clock, caplog) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    fill(s, 12)
    s.close()
    fs = CountingFileSystem()
    lazy = Segment(str(tmp_path), 100, small_config(), clock=clock, fs=fs)
    assert fs.opened[".index"] == fs.opened[".timeindex"] == 0
    assert lazy.index_problem() is None
    with open(lazy.offset_index.path, "r+b") as f:  # already loaded: corrupt the file anyway
        f.write(struct.pack(">ii", 1, 10**6))
    again = Segment(str(tmp_path), 100, small_config(), clock=clock)
    with caplog.at_level(logging.WARNING):
        assert again.read(105, 10_000).size > 0
    assert "rebuilding the indexes" in caplog.text
    assert again.offset_index.entry(0).position < again.size


def test_index_problem_reports_missing_and_torn_files(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    fill(s, 3)
    s.close()
    os.remove(s.files()[2])
    assert "missing" in (Segment(str(tmp_path), 100, small_config(), clock=clock)
                         .index_problem() or "")
    with open(s.files()[1], "ab") as f:
        f.write(b"\0\0\0")
    assert "multiple" in (Segment(str(tmp_path), 100, small_config(), clock=clock)
                          .index_problem() or "")


def test_truncate_to_drops_the_batch_holding_the_offset(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    batches = fill(s, 12)
    removed = s.truncate_to(111)  # inside the 6th batch (110, 111)
    assert removed == 7 * len(batches[0])
    assert s.read_next_offset() == 110
    assert s.offset_index.last_offset < 110
    assert s.max_timestamp_so_far().timestamp == DEFAULT_TS + 4
    fill(s, 1)
    assert s.read_next_offset() == 112


def test_become_inactive_trims_files_and_records_max_timestamp(tmp_path, clock) -> None:  # type: ignore
    config = small_config(**{"preallocate": "true"})
    s = new_segment(tmp_path, clock, config)
    assert os.path.getsize(s.log.path) == 4096
    b = make_batch(1, base_offset=100, timestamp=77)
    s.append([b], [read_header(b)])
    s.on_become_inactive()
    assert os.path.getsize(s.log.path) == s.size == len(b)
    assert os.path.getsize(s.files()[1]) == 0
    assert os.path.getsize(s.files()[2]) == 12
    assert tuple(s.time_index.last_entry()) == (77, 100)


def test_rename_and_delete_files(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    fill(s, 1)
    s.rename_to_deleted()
    assert sorted(os.listdir(tmp_path)) == [f + ".deleted" for f in sorted(
        os.path.basename(p[: -len(".deleted")]) for p in s.files())]
    s.delete_files()
    assert os.listdir(tmp_path) == []


def test_append_outside_the_segment_range_is_refused(tmp_path, clock) -> None:  # type: ignore
    s = new_segment(tmp_path, clock)
    b = make_batch(1, base_offset=99)
    with pytest.raises(ValueError, match="do not fit"):
        s.append([b], [read_header(b)])
