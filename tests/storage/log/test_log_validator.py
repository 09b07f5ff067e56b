from __future__ import annotations

import re

import pytest

from spark_log.records.batch_header import (
    CONTROL_BIT,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    TimestampType,
    read_header,
    verify_crc,
    write_crc,
)
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_validator import validate_append
from spark_log.storage.log.record_checks import validate_records

from ..batches import DEFAULT_TS, make_batch
from ..conftest import small_config

NOW = DEFAULT_TS


def validate(records: bytes, config: LogConfig | None = None,
             origin: AppendOrigin = AppendOrigin.CLIENT, next_offset: int = 40,
             **kw: object):  # type: ignore[no-untyped-def]
    return validate_append(records, config=config or small_config(), origin=origin,
                           next_offset=next_offset, leader_epoch=7, now_ms=NOW,
                           topic_partition="t-0", **kw)  # type: ignore[arg-type]


def reasons(exc: InvalidTimestampError) -> str:
    """The refusal's message and those of its refused records."""
    return "\n".join([str(exc), *(message or "" for _, message in exc.record_errors)])


def written(result) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(bytes(b) for b in result.buffers)


def test_client_append_gets_offsets_and_epoch_without_touching_the_input() -> None:
    batch = make_batch(3, timestamps=[NOW, NOW + 5, NOW + 2])
    original = bytes(batch)
    result = validate(batch)
    out = written(result)
    h = read_header(out)
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (40, 42, 7)
    verify_crc(out, 0, h)  # offsets and epoch lie outside the CRC
    assert out[61:] == batch[61:] and batch == original
    assert (result.first_offset, result.last_offset, result.record_count) == (40, 42, 3)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW + 5, 42)
    assert result.log_append_time == -1 and result.size == len(batch)
    assert len(result.buffers) == 2  # the patched header and the untouched records


def test_log_append_time_topic_stamps_the_batch() -> None:
    config = small_config(**{"message.timestamp.type": "LogAppendTime"})
    result = validate(make_batch(2, timestamp=5), config)
    out = written(result)
    h = read_header(out)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.max_timestamp == NOW
    verify_crc(out, 0, h)
    assert result.log_append_time == NOW == result.max_timestamp


@pytest.mark.parametrize("records,match", [
    (make_batch(1, base_offset=3), "should be 0, but it is 3"),
    (make_batch(3, records_count=2), "count of records 2"),
    (make_batch(1, records_count=0), "count of records 0"),
    (make_batch(1, attributes=CONTROL_BIT), "control records"),
    (make_batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), "sequence number -1"),
    (make_batch(1) + make_batch(1), "one batch per partition"),
    (b"", "no record batches"),
])
def test_client_batches_breaking_rules_are_invalid(records: bytes, match: str) -> None:
    with pytest.raises(InvalidRecordError, match=match):
        validate(records)


def test_coordinator_may_write_control_batches() -> None:
    result = validate(make_batch(1, attributes=CONTROL_BIT), origin=AppendOrigin.COORDINATOR)
    assert result.headers[0].is_control


def test_corrupt_input_is_rejected() -> None:
    batch = bytearray(make_batch(2))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate(bytes(batch))
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        validate(make_batch(2)[:-3])
    with pytest.raises(CorruptRecordError, match="magic"):
        validate(make_batch(1)[:16] + b"\x01" + make_batch(1)[17:])


def test_size_limits() -> None:
    big = make_batch(1, value_size=3000)
    with pytest.raises(RecordTooLargeError, match=f"is {len(big)} bytes"):
        validate(big, small_config(**{"max.message.bytes": str(len(big) - 1)}))
    validate(big, small_config(**{"max.message.bytes": str(len(big))}))
    follower = make_batch(1, base_offset=40, value_size=3000)
    validate(follower, small_config(**{"max.message.bytes": "10"}),
             origin=AppendOrigin.REPLICATION)  # the leader already accepted it
    with pytest.raises(RecordBatchTooLargeError, match="segment size of 4096"):
        validate(make_batch(1, value_size=5000))


BOUNDED = {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"}


@pytest.mark.parametrize("record_validator", [None, validate_records], ids=["header", "records"])
@pytest.mark.parametrize("timestamps,ok", [
    ([NOW - 1000], True), ([NOW - 1001], False), ([NOW + 500], True), ([NOW + 501], False),
    ([NOW, NOW + 501], False), ([NOW - 1001, NOW], False), ([-1], True),
])
def test_create_time_bounds(timestamps: list[int], ok: bool, record_validator: object) -> None:
    batch = make_batch(len(timestamps), timestamps=timestamps)
    if ok:
        validate(batch, small_config(**BOUNDED), record_validator=record_validator)
    else:
        with pytest.raises(InvalidTimestampError) as refused:
            validate(batch, small_config(**BOUNDED), record_validator=record_validator)
        assert re.search(r"within \[.*\]", reasons(refused.value))


def test_the_first_timestamp_is_not_the_least_so_records_are_checked() -> None:
    batch = make_batch(3, timestamps=[NOW, NOW - 1001, NOW])  # header: first NOW, max NOW
    validate(batch, small_config(**BOUNDED))  # what the header shows is in range
    with pytest.raises(InvalidTimestampError) as refused:
        validate(batch, small_config(**BOUNDED), record_validator=validate_records)
    assert [e.batch_index for e in refused.value.record_errors] == [1]


def undecodable(batch: bytes) -> bytes:
    """`batch` with its header and CRC intact but records that cannot be decoded."""
    out = bytearray(batch)
    out[HEADER_SIZE:] = b"\xff" * (len(out) - HEADER_SIZE)
    write_crc(out, 0, len(out))
    return bytes(out)


@pytest.mark.parametrize("props,batch,decoded", [
    ({}, make_batch(3, timestamps=[NOW - 10**12, NOW, NOW + 10**12]), False),
    ({}, make_batch(2, timestamps=[NOW, NOW + 10**12 + 1]), True),
    (BOUNDED, make_batch(2), True),
    ({"cleanup.policy": "compact"}, make_batch(2), True),
    ({"cleanup.policy": "compact"}, make_batch(1, attributes=CONTROL_BIT), False),
    ({"message.timestamp.type": "LogAppendTime"}, make_batch(2, timestamp=NOW + 10**13), False),
    ({"message.timestamp.type": "LogAppendTime"}, make_batch(2, attributes=TIMESTAMP_TYPE_BIT),
     True),
    (BOUNDED, make_batch(2, attributes=TIMESTAMP_TYPE_BIT, timestamps=[0, NOW + 500]), False),
    ({}, make_batch(2, attributes=TIMESTAMP_TYPE_BIT, max_timestamp=-1), True),
], ids=["default-config", "max-too-late", "bounded-past", "compacted", "compacted-control",
        "log-append-time-topic", "claims-log-append-time", "log-append-time-batch-in-range",
        "log-append-time-batch-without-timestamp"])
def test_records_are_decoded_only_when_the_header_cannot_prove_the_batch(
        props: dict[str, str], batch: bytes, decoded: bool) -> None:
    records = undecodable(batch)
    origin = AppendOrigin.COORDINATOR if read_header(batch).is_control else AppendOrigin.CLIENT
    config = small_config(**props)  # message.timestamp.after.max.ms = 10**12
    if decoded:
        with pytest.raises(CorruptRecordError):
            validate(records, config, origin=origin, record_validator=validate_records)
    else:
        validate(records, config, origin=origin, record_validator=validate_records)


def test_producers_may_not_claim_log_append_time() -> None:
    lat_topic = small_config(**{"message.timestamp.type": "LogAppendTime"})
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        validate(make_batch(1, attributes=TIMESTAMP_TYPE_BIT), lat_topic)
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        validate(make_batch(1, attributes=TIMESTAMP_TYPE_BIT, timestamp=-1))
    validate(make_batch(1, attributes=TIMESTAMP_TYPE_BIT))  # CreateTime topic, ts in range
    for config in (lat_topic, small_config()):
        with pytest.raises(InvalidTimestampError) as refused:
            validate(make_batch(2, attributes=TIMESTAMP_TYPE_BIT, max_timestamp=-1), config,
                     record_validator=validate_records)
        assert [e.batch_index for e in refused.value.record_errors] == [0, 1]
        assert "should not set timestamp type to LogAppendTime" in reasons(refused.value)


def test_replication_keeps_offsets_and_checks_order() -> None:
    records = make_batch(2, base_offset=50, leader_epoch=3) + make_batch(1, base_offset=60)
    result = validate(records, origin=AppendOrigin.REPLICATION)
    assert written(result) == records
    assert [h.base_offset for h in result.headers] == [50, 60]
    assert (result.first_offset, result.last_offset) == (50, 60)
    with pytest.raises(OffsetsOutOfOrderError):
        validate(make_batch(2, base_offset=50) + make_batch(1, base_offset=51),
                 origin=AppendOrigin.REPLICATION)
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        validate(make_batch(2, base_offset=30), origin=AppendOrigin.REPLICATION)
    assert (e.value.first_offset, e.value.last_offset) == (30, 31)


def test_record_validator_is_told_what_to_check() -> None:
    seen = []

    def check(batch, header, *, config, now_ms, topic_partition, check_timestamps):  # type: ignore[no-untyped-def]
        seen.append((bytes(batch), config.compact, now_ms, topic_partition, check_timestamps))
        if header.records_count > 1:
            raise InvalidRecordError("Compacted topic cannot accept message without key")

    compacted = small_config(**{"cleanup.policy": "compact"})
    one = make_batch(1, key=None)
    validate(one, compacted, record_validator=check)
    assert seen == [(one, True, NOW, "t-0", False)]
    with pytest.raises(InvalidRecordError, match="without key"):
        validate(make_batch(2, key=None), compacted, record_validator=check)
    seen.clear()
    validate(one, small_config(**BOUNDED), record_validator=check)
    assert seen == [(one, False, NOW, "t-0", True)]
    seen.clear()
    validate(one, record_validator=check)  # nothing the header cannot settle
    validate(one, origin=AppendOrigin.REPLICATION, next_offset=0, record_validator=check)
    assert seen == []
