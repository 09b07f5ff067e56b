"""The record-level hooks wired into storage (record timestamp search, null-key check)."""

from __future__ import annotations

import pytest

from spark_log.records import Record, build_batch
from spark_log.records.batch_header import read_header
from spark_log.storage.errors import InvalidRecordError
from spark_log.storage.record_checks import RECORD_TIMESTAMP_SEARCH, reject_null_keys_on_compacted

from .conftest import open_log, small_config


def batch(timestamps: list[int], keys: list[bytes | None] | None = None, base: int = 0) -> bytes:
    keys = keys or [b"k"] * len(timestamps)
    return build_batch([Record(base + i, ts, k, b"v") for i, (ts, k) in
                        enumerate(zip(timestamps, keys, strict=True))], base_offset=base)


def test_search_finds_the_exact_record() -> None:
    b = batch([100, 300, 200, 400], base=10)
    h = read_header(b)
    assert RECORD_TIMESTAMP_SEARCH.first_at_or_after(b, h, 150, 0) == (11, 300)
    assert RECORD_TIMESTAMP_SEARCH.first_at_or_after(b, h, 150, 12) == (12, 200)
    assert RECORD_TIMESTAMP_SEARCH.first_at_or_after(b, h, 401, 0) is None
    assert RECORD_TIMESTAMP_SEARCH.offset_of_max_timestamp(b, h) == 13


def test_partition_log_uses_the_record_search(tmp_path, clock) -> None:  # type: ignore
    log = open_log(tmp_path, small_config(), clock, record_search=RECORD_TIMESTAMP_SEARCH)
    log.append(batch([100, 300, 200]), leader_epoch=0)
    assert tuple(log.offset_for_timestamp(150))[:2] == (300, 1)  # type: ignore[index]
    assert log.list_offset(-3).offset == 1  # type: ignore[union-attr]


def test_null_keys_are_rejected_on_compacted_topics_only(tmp_path, clock) -> None:  # type: ignore
    compacted = small_config(**{"cleanup.policy": "compact"})
    log = open_log(tmp_path, compacted, clock, record_validator=reject_null_keys_on_compacted)
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append(batch([1, 2], keys=[b"a", None]), leader_epoch=0)
    assert log.log_end_offset == 0
    log.append(batch([1, 2]), leader_epoch=0)
    plain = batch([1], keys=[None])
    reject_null_keys_on_compacted(memoryview(plain), read_header(plain), config=small_config(),
                                  now_ms=0)
