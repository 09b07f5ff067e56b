"""Hypothesis strategies for records and batch options, shared by the records tests."""

from hypothesis import strategies as st

from spark_log.records.batch_header import Compression, TimestampType
from spark_log.records.record import Record

BASE_TIMESTAMP = st.integers(1 << 31, 1 << 42)  # deltas of +-2^31 stay >= 0
keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
headers = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4
).map(tuple)


@st.composite
def record_lists(draw, min_size=0, max_size=20, base_offset=0):
    """Records with increasing offsets (gaps allowed) from `base_offset` and timestamps that
    may go backwards, as producers' clocks do."""
    count = draw(st.integers(min_size, max_size))
    first_ts = draw(BASE_TIMESTAMP)
    records, offset = [], base_offset
    for _ in range(count):
        offset += draw(st.sampled_from((0, 0, 0, 1, 7, 1000)))
        records.append(
            Record(
                offset,
                first_ts + draw(st.integers(-(1 << 31), 1 << 31)),
                draw(keys),
                draw(values),
                draw(headers),
            )
        )
        offset += 1
    return records


compressions = st.sampled_from(list(Compression))
timestamp_types = st.sampled_from(list(TimestampType))
