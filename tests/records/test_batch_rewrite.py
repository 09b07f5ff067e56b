"""Rewriting a batch with some of its records, as log compaction does: spans, rebuilt batches,
delete horizons, empty batches."""

from __future__ import annotations

from itertools import pairwise

import pytest

from spark_log.records import Compression, CorruptRecordError, Record, build_batch, decode_batch
from spark_log.records.batch_header import DELETE_HORIZON_BIT, read_header, verify_crc
from spark_log.records.batch_rewrite import (
    END,
    HAS_VALUE,
    KEY,
    OFFSET,
    START,
    empty_batch,
    map_latest_offsets,
    rebuild_batch,
    scan_record_spans,
)
from spark_log.records.record_batch import BatchView

TS = 1_700_000_000_000


def batch(compression: Compression = Compression.NONE, **options: object) -> bytes:
    records = [Record(100 + i, TS + i * 10, f"k{i}".encode(), None if i == 2 else f"v{i}".encode(),
                      (("h", b"x"),) if i == 1 else ()) for i in range(5)]
    return build_batch(records, base_offset=100, compression=compression,
                       **options)  # type: ignore[arg-type]


def spans_of(raw: bytes) -> tuple[BatchView, bytes, list]:  # type: ignore[type-arg]
    view = BatchView(raw)
    section = view.records_section()
    return view, section, scan_record_spans(section, view.header.records_count, 100)


def test_spans_give_offsets_keys_tombstones_and_cover_the_section() -> None:
    _, section, spans = spans_of(batch())
    assert [s[OFFSET] for s in spans] == [100, 101, 102, 103, 104]
    assert [s[KEY] for s in spans] == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    assert [s[HAS_VALUE] for s in spans] == [True, True, False, True, True]
    assert spans[0][START] == 0 and spans[-1][END] == len(section)
    assert all(a[END] == b[START] for a, b in pairwise(spans))


def test_map_latest_offsets_keeps_the_last_offset_per_key_from_the_start() -> None:
    records = [Record(50 + i, TS, b"k%d" % (i % 3), b"v") for i in range(10)]
    view = BatchView(build_batch(records, base_offset=50))
    latest: dict[bytes, int] = {b"old": 1}
    map_latest_offsets(view.records_section(), 10, 50, latest, 52)
    assert latest == {b"old": 1, b"k0": 59, b"k1": 57, b"k2": 58}
    with pytest.raises(CorruptRecordError):
        map_latest_offsets(view.records_section()[:-2], 10, 50, latest, 0)


def test_spans_refuse_a_section_that_does_not_match_the_count() -> None:
    _, section, _ = spans_of(batch())
    with pytest.raises(CorruptRecordError):
        scan_record_spans(section, 6, 100)
    with pytest.raises(CorruptRecordError):
        scan_record_spans(section[:-3], 5, 100)


@pytest.mark.parametrize("codec", list(Compression))
def test_rebuilt_batch_keeps_offsets_span_codec_and_kept_records(codec: Compression) -> None:
    raw = batch(codec, producer_id=9, producer_epoch=2, base_sequence=40)
    view, section, spans = spans_of(raw)
    rebuilt = rebuild_batch(view.header, section, [spans[1], spans[3]])
    decoded = decode_batch(rebuilt)  # verifies the CRC
    h = decoded.header
    assert (h.base_offset, h.last_offset, h.records_count) == (100, 104, 2)
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 40)
    original = {r.offset: r for r in decode_batch(raw).records}
    assert list(decoded.records) == [original[101], original[103]]
    assert h.max_timestamp == TS + 30  # recomputed from the kept records
    assert not h.has_delete_horizon


def test_setting_a_delete_horizon_keeps_record_timestamps() -> None:
    raw = batch()
    view, section, spans = spans_of(raw)
    horizon = TS + 86_400_000
    rebuilt = rebuild_batch(view.header, section, spans, delete_horizon_ms=horizon)
    decoded = decode_batch(rebuilt)
    assert decoded.header.has_delete_horizon
    assert decoded.header.attributes & DELETE_HORIZON_BIT
    assert decoded.header.base_timestamp == horizon
    assert decoded.records == decode_batch(raw).records
    # A batch that has a horizon keeps it when rebuilt again.
    view2, section2, spans2 = spans_of(rebuilt)
    again = decode_batch(rebuild_batch(view2.header, section2, spans2[2:],
                                       delete_horizon_ms=horizon + 5))
    assert again.header.base_timestamp == horizon
    assert again.records == decode_batch(raw).records[2:]


def test_log_append_time_batches_keep_their_max_timestamp() -> None:
    from spark_log.records import TimestampType

    raw = batch(timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=TS + 999)
    view, section, spans = spans_of(raw)
    h = read_header(rebuild_batch(view.header, section, spans[:1]))
    assert h.max_timestamp == TS + 999


def test_empty_batch_keeps_the_producer_state_and_offsets_span() -> None:
    raw = batch(Compression.ZSTD, producer_id=9, producer_epoch=2, base_sequence=40,
                is_transactional=True)
    original = read_header(raw)
    empty = empty_batch(original)
    verify_crc(empty, 0, read_header(empty))
    h = decode_batch(empty).header
    assert (h.base_offset, h.last_offset, h.records_count) == (100, 104, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 40)
    assert h.is_transactional and not h.is_control and h.compression == Compression.NONE
    assert h.max_timestamp == original.max_timestamp and h.base_timestamp == -1
    assert h.last_sequence == original.last_sequence
    assert decode_batch(empty).records == ()
