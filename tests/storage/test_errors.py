from __future__ import annotations

import pytest

from spark_log.records.errors import CorruptRecordError
from spark_log.storage import errors


@pytest.mark.parametrize("exc,name", [
    (errors.KafkaStorageError("x"), "KAFKA_STORAGE_ERROR"),
    (errors.OffsetOutOfRangeError("x"), "OFFSET_OUT_OF_RANGE"),
    (errors.RecordTooLargeError("x"), "MESSAGE_TOO_LARGE"),
    (errors.RecordBatchTooLargeError("x"), "RECORD_LIST_TOO_LARGE"),
    (errors.InvalidRecordError("x"), "INVALID_RECORD"),
    (errors.InvalidTimestampError("x"), "INVALID_TIMESTAMP"),
    (errors.InvalidConfigurationError("x", "k"), "INVALID_CONFIG"),
    (errors.OffsetsOutOfOrderError("x"), "UNKNOWN_SERVER_ERROR"),
    (errors.UnexpectedAppendOffsetError("x", 1, 2), "UNKNOWN_SERVER_ERROR"),
    (CorruptRecordError("x"), "CORRUPT_MESSAGE"),
    (RuntimeError("x"), "UNKNOWN_SERVER_ERROR"),
])
def test_each_error_maps_to_its_kafka_code(exc: BaseException, name: str) -> None:
    assert errors.kafka_error_name(exc) == name


def test_corrupt_record_error_is_the_record_layers() -> None:
    assert errors.CorruptRecordError is CorruptRecordError


def test_unexpected_append_offset_carries_the_offsets() -> None:
    e = errors.UnexpectedAppendOffsetError("msg", 5, 9)
    assert (e.first_offset, e.last_offset, str(e)) == (5, 9, "msg")
