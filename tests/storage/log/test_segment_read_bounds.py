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


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.integers(1, 5), min_size=1, max_size=60),
       value_size=st.integers(0, 300), interval=st.sampled_from([1, 200, 1024, 4096]),
       picks=st.data())
def test_read_matches_a_full_header_walk(records: list[int], value_size: int, interval: int,
                                         picks: st.DataObject) -> None:
    config = LogConfig(index_interval_bytes=interval)
    with tempfile.TemporaryDirectory() as tmp:
        segment = Segment(tmp, BASE, config, clock=ManualClock(), active=True, create=True)
        offset = BASE
        written = []
        for n in records:
            batch = make_batch(n, base_offset=offset, timestamp=DEFAULT_TS,
                               value_size=value_size)
            segment.append([batch], [read_header(batch)])
            written.append(batch)
            offset += n
        data = b"".join(written)
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
