"""The record-level hooks wired into storage (record timestamp search, the record checks of a
leader append), and the refusals they answer with: Kafka's codes, indexes and messages."""

from __future__ import annotations

import pytest

from spark_log.records import Compression, Record, TimestampType, build_batch, read_header
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import InvalidRecordError, InvalidTimestampError, RecordError
from spark_log.storage.log.log_config import LONG_MAX, LogConfig
from spark_log.storage.log.log_validator import ValidatedAppend, validate_append
from spark_log.storage.log.record_checks import RECORD_TIMESTAMP_SEARCH, validate_records

from ..batches import DEFAULT_TS
from ..conftest import open_log, small_config

NOW = DEFAULT_TS
NO_KEY = "Compacted topic cannot accept message without key in topic partition t-0"
BAD_TIMESTAMPS = "One or more records have been rejected due to invalid timestamp"
CLAIMS_LAT = "Producer should not set timestamp type to LogAppendTime."


def batch(timestamps: list[int], keys: list[bytes | None] | None = None, base: int = 0,
          **options: object) -> bytes:
    keys = keys or [b"k"] * len(timestamps)
    return build_batch([Record(base + i, ts, k, b"v%d" % i) for i, (ts, k) in
                        enumerate(zip(timestamps, keys, strict=True))], base_offset=base,
                       **options)  # type: ignore[arg-type]


def check(records: bytes, **props: str) -> ValidatedAppend:
    """A client produce of `records` to t-0, validated with the record checks."""
    return validate_append(records, config=LogConfig.from_properties(props),
                           origin=AppendOrigin.CLIENT, next_offset=0, leader_epoch=0,
                           now_ms=NOW, topic_partition="t-0", record_validator=validate_records)


def refusal(records: bytes, **props: str) -> InvalidRecordError | InvalidTimestampError:
    with pytest.raises((InvalidRecordError, InvalidTimestampError)) as refused:
        check(records, **props)
    return refused.value


def out_of_range(ts: int, offset: int, low: int, high: int) -> str:
    return (f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp "
            f"should be within [{low}, {high}]")


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


def test_null_keys_refuse_the_batch_naming_each_record() -> None:
    refused = refusal(batch([NOW] * 4, keys=[b"a", None, b"b", None]),
                      **{"cleanup.policy": "compact"})
    assert type(refused) is InvalidRecordError
    assert refused.record_errors == (RecordError(1, NO_KEY), RecordError(3, NO_KEY))
    assert str(refused) == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{NO_KEY}'"
        f"), RecordError(batchIndex=3, message='{NO_KEY}')]")


def test_the_invalid_record_message_shows_three_errors_at_most() -> None:
    refused = refusal(batch([NOW] * 5, keys=[None] * 5), **{"cleanup.policy": "compact"})
    assert [e.batch_index for e in refused.record_errors] == [0, 1, 2, 3, 4]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{NO_KEY}')" for i in range(3))
    assert str(refused) == ("One or more records have been rejected due to 5 record errors in "
                            f"total, and only showing the first three errors at most: [{shown}]")


def test_every_record_timestamp_is_checked_against_both_bounds() -> None:
    bounds = {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"}
    records = batch([NOW, NOW - 1001, NOW + 500, NOW + 501, NOW - 1000, -1])
    refused = refusal(records, **bounds)
    assert type(refused) is InvalidTimestampError and str(refused) == BAD_TIMESTAMPS
    low, high = NOW - 1000, NOW + 500
    assert refused.record_errors == (RecordError(1, out_of_range(NOW - 1001, 1, low, high)),
                                     RecordError(3, out_of_range(NOW + 501, 3, low, high)))
    check(batch([NOW - 1000, NOW + 500, -1]), **bounds)


def test_a_key_error_comes_first_and_any_timestamp_error_decides_the_code() -> None:
    props = {"cleanup.policy": "compact", "message.timestamp.before.max.ms": "1000"}
    refused = refusal(batch([NOW - 5000, NOW, NOW - 5000], keys=[None, None, b"k"]), **props)
    assert type(refused) is InvalidTimestampError and str(refused) == BAD_TIMESTAMPS
    assert refused.record_errors == (
        RecordError(0, NO_KEY), RecordError(1, NO_KEY),
        RecordError(2, out_of_range(NOW - 5000, 2, NOW - 1000, NOW + 3_600_000)))


def test_bounds_are_printed_as_java_longs() -> None:
    refused = refusal(batch([NOW - 2000]), **{"message.timestamp.before.max.ms": "1000",
                                              "message.timestamp.after.max.ms": str(LONG_MAX)})
    # now + Long.MAX_VALUE overflows in Kafka's message too
    wrapped = NOW + LONG_MAX - 2**64
    assert refused.record_errors == (RecordError(0, out_of_range(NOW - 2000, 0, NOW - 1000,
                                                                  wrapped)),)


def test_a_batch_claiming_log_append_time_without_a_timestamp_is_refused_per_record() -> None:
    lat = batch([NOW, NOW], timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=-1)
    refused = refusal(lat)
    assert type(refused) is InvalidTimestampError and str(refused) == BAD_TIMESTAMPS
    assert refused.record_errors == tuple(RecordError(i, (
        f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp=-1, key=1 "
        f"bytes, value=2 bytes). {CLAIMS_LAT}")) for i in range(2))


def test_a_log_append_time_batch_reads_its_max_timestamp_in_every_record() -> None:
    future = NOW + 3_600_001
    refused = refusal(batch([NOW, NOW], timestamp_type=TimestampType.LOG_APPEND_TIME,
                            max_timestamp=future))
    assert refused.record_errors == tuple(
        RecordError(i, out_of_range(future, i, NOW - LONG_MAX, NOW + 3_600_000))
        for i in range(2))
    check(batch([0, 0], timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=NOW))


def test_log_append_time_topics_refuse_only_batches_claiming_it() -> None:
    lat_topic = {"message.timestamp.type": "LogAppendTime"}
    check(batch([NOW + 10**9]), **lat_topic)  # the broker's clock replaces it
    refused = refusal(batch([NOW], keys=[None], timestamp_type=TimestampType.LOG_APPEND_TIME),
                      **lat_topic)
    assert refused.record_errors == (RecordError(0, (
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=0 "
        f"bytes, value=2 bytes). {CLAIMS_LAT}")),)


@pytest.mark.parametrize("compression_type,shown", [
    ("producer", "PartialDefaultRecord(offset=0, timestamp={}, key=-1 bytes, value=2 bytes)"),
    ("gzip", "PartialDefaultRecord(offset=0, timestamp={}, key=-1 bytes, value=2 bytes)"),
    ("zstd", "DefaultRecord(offset=0, timestamp={}, key=0 bytes, value=2 bytes)"),
])
def test_records_show_as_the_reader_kafka_would_use(compression_type: str, shown: str) -> None:
    """A compressed batch kept in its codec is read by Kafka without keys and values."""
    gzipped = batch([NOW], keys=[None], compression=Compression.GZIP,
                    timestamp_type=TimestampType.LOG_APPEND_TIME)
    refused = refusal(gzipped, **{"message.timestamp.type": "LogAppendTime",
                                  "compression.type": compression_type})
    assert refused.record_errors == (
        RecordError(0, f"Invalid timestamp type in message {shown.format(NOW)}. {CLAIMS_LAT}"),)


def test_partition_log_refuses_the_whole_batch(tmp_path, clock) -> None:  # type: ignore
    compacted = small_config(**{"cleanup.policy": "compact"})
    log = open_log(tmp_path, compacted, clock, record_validator=validate_records)
    with pytest.raises(InvalidRecordError) as refused:
        log.append(batch([1, 2], keys=[b"a", None]), leader_epoch=0)
    assert refused.value.record_errors == (RecordError(1, NO_KEY),)
    assert log.log_end_offset == 0
    assert log.append(batch([1, 2]), leader_epoch=0).last_offset == 1
    plain = open_log(tmp_path / "plain", small_config(), clock,
                     record_validator=validate_records)
    assert plain.append(batch([1], keys=[None]), leader_epoch=0).last_offset == 0
