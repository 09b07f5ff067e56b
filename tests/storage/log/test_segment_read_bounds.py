"""Segment.read's shortcuts (the index jump and the whole-remainder slice) return exactly what a
walk over every batch header returns, for any mix of batch sizes, offsets and limits."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.clock import ManualClock
from spark_log.records.batch_header import iter_headers, read_header
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.segment import Segment

from ..batches import DEFAULT_TS, make_batch

BASE = 1000


def reference(data: bytes, start_offset: int, max_bytes: int, max_offset: int | None,
              min_one_batch: bool) -> tuple[int, int]:
    """(position, size) of the read by walking every header from the start of the file."""
    headers = list(iter_headers(data))
    start, head = next((p, h) for p, h in headers if h.last_offset >= start_offset)
    limit = max(max_bytes, head.size) if min_one_batch else max_bytes
    end = start
    for pos, h in headers:
        if pos < start:
            continue
        if (max_offset is not None and h.base_offset >= max_offset) or \
                pos + h.size - start > limit:
            break
        end = pos + h.size
    return start, end - start


def filled(tmp: str, interval: int, records: list[tuple[int, int]], value_size: int
           ) -> tuple[Segment, bytes, int]:
    """A segment of batches of (records, offset gap before it): the segment, its bytes, the
    offset after the last batch."""
    segment = Segment(tmp, BASE, LogConfig(index_interval_bytes=interval), clock=ManualClock(),
                      active=True, create=True)
    offset, written = BASE, []
    for n, gap in records:
        offset += gap
        batch = make_batch(n, base_offset=offset, timestamp=DEFAULT_TS, value_size=value_size)
        segment.append([batch], [read_header(batch)])
        written.append(batch)
        offset += n
    return segment, b"".join(written), offset


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.integers(1, 5), min_size=1, max_size=60),
       value_size=st.integers(0, 300), interval=st.sampled_from([1, 200, 1024, 4096]),
       picks=st.data())
def test_read_matches_a_full_header_walk(records: list[int], value_size: int, interval: int,
                                         picks: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        segment, data, offset = filled(tmp, interval, [(n, 0) for n in records], value_size)
        for _ in range(8):
            start = picks.draw(st.integers(BASE, offset - 1))
            max_bytes = picks.draw(st.integers(0, len(data) + 100))
            max_offset = picks.draw(st.none() | st.integers(BASE, offset + 5))
            min_one = picks.draw(st.booleans())
            end_known = picks.draw(st.booleans())
            got = segment.read(start, max_bytes, max_offset=max_offset, min_one_batch=min_one,
                               end_offset=offset if end_known else None)
            want_start, want_size = reference(data, start, max_bytes, max_offset, min_one)
            assert got.size == want_size
            if want_size:  # an empty read is one shared empty slice, at no position
                assert got.position == want_start
                assert got.read_bytes() == data[want_start : want_start + want_size]
        segment.close()


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 3)), min_size=1,
                        max_size=60),
       value_size=st.integers(0, 300), interval=st.sampled_from([1, 200, 4096]),
       picks=st.data())
def test_reads_that_follow_each_other_match_a_full_header_walk(
        records: list[tuple[int, int]], value_size: int, interval: int,
        picks: st.DataObject) -> None:
    """A consumer keeping up: most reads start at the offset after the previous one (the
    remembered-position path), some elsewhere; offsets have gaps, as after compaction, and the
    segment is truncated part way, which must forget what it remembered."""
    with tempfile.TemporaryDirectory() as tmp:
        segment, data, end = filled(tmp, interval, records, value_size)
        first = read_header(data).base_offset
        start = first
        for step in range(12):
            if step == 6 and picks.draw(st.booleans()):  # cut the log behind the reader
                segment.truncate_to(picks.draw(st.integers(first + 1, end)))
                data = segment.log.read(0, segment.size)
                end = max((h.next_offset for _, h in iter_headers(data)), default=BASE)
            if not data or start >= end or picks.draw(st.integers(0, 4)) == 0:
                if not data:
                    break
                start = picks.draw(st.integers(first, end - 1))
            max_bytes = picks.draw(st.sampled_from([0, 1, 100, 1000, len(data) + 100]))
            max_offset = picks.draw(st.none() | st.integers(first, end + 5))
            min_one = picks.draw(st.booleans())
            end_known = picks.draw(st.booleans())  # as the log passes it, or not
            got = segment.read(start, max_bytes, max_offset=max_offset, min_one_batch=min_one,
                               end_offset=end if end_known else None)
            want_start, want_size = reference(data, start, max_bytes, max_offset, min_one)
            assert got.size == want_size
            if want_size:
                assert got.position == want_start
                assert got.read_bytes() == data[want_start : want_start + want_size]
                last = list(iter_headers(data[want_start : want_start + want_size]))[-1][1]
                assert got.next_offset in (None, last.next_offset)
                start = last.next_offset
        segment.close()


def test_a_read_from_a_remembered_position_carries_the_bytes_it_read() -> None:
    """The consumer keeping up: the read after a read starts where that one ended, copies the
    batches once, and the slice hands those bytes on so they are not read again to be sent."""
    with tempfile.TemporaryDirectory() as tmp:
        segment, data, end = filled(tmp, 4096, [(2, 0)] * 5, 50)
        first = segment.read(BASE, 1, min_one_batch=True)  # one batch: the indexed path
        assert first.data is None and first.next_offset == BASE + 2
        second = segment.read(BASE + 2, len(data), min_one_batch=True)
        assert second.data is not None
        assert bytes(second.data) == data[first.size:] == second.read_bytes()
        assert second.next_offset == end
        segment.close()


def test_a_consumer_at_the_end_reads_each_new_batch_from_where_it_stopped() -> None:
    """A consumer keeping up asks for far more than is there: its read takes the rest of the
    segment, up to the end offset its log passes, and the next batch appended is read from
    where that read ended, without the index look-up and header walk."""
    with tempfile.TemporaryDirectory() as tmp:
        segment, _, end = filled(tmp, 100, [(2, 0)] * 20, 50)
        caught_up = segment.read(BASE + 6, 1 << 20, end_offset=end)  # the indexed path
        assert caught_up.data is None
        assert caught_up.position + caught_up.size == segment.size
        assert caught_up.next_offset == end
        for step in range(3):
            batch = make_batch(1, base_offset=end, timestamp=DEFAULT_TS, value_size=50)
            segment.append([batch], [read_header(batch)])
            got = segment.read(end, 1 << 20, end_offset=end + 1)
            assert got.data is not None, step  # read where the last read stopped
            assert bytes(got.data) == batch == got.read_bytes()
            assert got.next_offset == end + 1
            end += 1
        segment.close()
