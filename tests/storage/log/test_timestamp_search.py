from __future__ import annotations

from spark_log.records.batch_header import TIMESTAMP_TYPE_BIT, read_header
from spark_log.storage.log.timestamp_search import HEADER_ONLY

from ..batches import make_batch


def test_header_only_search_answers_from_the_batch() -> None:
    batch = make_batch(3, base_offset=10, timestamps=[100, 300, 200])
    h = read_header(batch)
    assert HEADER_ONLY.first_at_or_after(batch, h, 250, 0) == (10, 300)
    assert HEADER_ONLY.first_at_or_after(batch, h, 250, 11) == (11, 300)
    assert HEADER_ONLY.first_at_or_after(batch, h, 301, 0) is None
    assert HEADER_ONLY.first_at_or_after(batch, h, 0, 13) is None


def test_offset_of_max_timestamp_never_skips_the_record() -> None:
    batch = make_batch(3, base_offset=10, timestamps=[100, 300, 200])
    assert HEADER_ONLY.offset_of_max_timestamp(batch, read_header(batch)) == 10
    lat = make_batch(3, base_offset=20, attributes=TIMESTAMP_TYPE_BIT)
    assert HEADER_ONLY.offset_of_max_timestamp(lat, read_header(lat)) == 20
