"""The __consumer_offsets record formats and the group -> partition mapping, against Kafka's
byte layouts and Java's String.hashCode."""

from __future__ import annotations

import struct

import pytest

from spark_log.broker.group.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from spark_log.broker.group.offsets_topic import java_string_hash, kafka_abs, partition_for
from spark_log.records import CorruptRecordError


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    key = OffsetCommitKey("group-a", "orders", 7)
    expected = struct.pack(">h", 1) + _s("group-a") + _s("orders") + struct.pack(">i", 7)
    assert encode_key(key) == expected
    assert decode_key(expected) == key
    # version 0 keys (written by old brokers) have the same fields
    assert decode_key(struct.pack(">h", 0) + expected[2:]) == key


def test_group_metadata_key_is_version_2_group() -> None:
    expected = struct.pack(">h", 2) + _s("group-a")
    assert encode_key(GroupMetadataKey("group-a")) == expected
    assert decode_key(expected) == GroupMetadataKey("group-a")


def test_newer_record_types_are_recognised_as_unknown() -> None:
    assert decode_key(struct.pack(">h", 3) + _s("consumer-group")) == UnknownKey(3)


def test_offset_commit_value_v3_layout() -> None:
    value = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1_700_000_000_000,
                              leader_epoch=5)
    expected = (struct.pack(">hqi", 3, 42, 5) + _s("meta")
                + struct.pack(">q", 1_700_000_000_000))
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_offset_commit_value_with_expire_timestamp_is_written_as_v1() -> None:
    value = OffsetCommitValue(offset=9, metadata="", commit_timestamp=100, expire_timestamp=200)
    expected = struct.pack(">hq", 1, 9) + _s("") + struct.pack(">qq", 100, 200)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_offset_commit_value_v0_and_flexible_v4_decode() -> None:
    v0 = struct.pack(">hq", 0, 11) + _s("x") + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(11, "x", 77)
    # v4: compact string (uvarint len+1) and an empty tagged-field section
    v4 = struct.pack(">hqi", 4, 12, 3) + bytes([2]) + b"y" + struct.pack(">q", 78) + bytes([0])
    assert decode_offset_commit_value(v4) == OffsetCommitValue(12, "y", 78, leader_epoch=3)


def test_group_metadata_value_v3_layout_and_round_trip() -> None:
    member = MemberMetadata("m-1", "instance-1", "client", "/127.0.0.1", 300_000, 10_000,
                            b"\x00\x01sub", b"\x00\x01asg")
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 1_700_000_000_123, (member,))
    expected = (struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", 4) + _s("range")
                + _s("m-1") + struct.pack(">q", 1_700_000_000_123) + struct.pack(">i", 1)
                + _s("m-1") + _s("instance-1") + _s("client") + _s("/127.0.0.1")
                + struct.pack(">ii", 300_000, 10_000)
                + struct.pack(">i", 5) + b"\x00\x01sub" + struct.pack(">i", 5) + b"\x00\x01asg")
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("", 0, None, None, -1, ())
    data = encode_group_metadata_value(value)
    assert data == struct.pack(">h", 3) + _s("") + struct.pack(">ihhqi", 0, -1, -1, -1, 0)
    assert decode_group_metadata_value(data) == value


def test_truncated_and_unknown_versions_are_corrupt() -> None:
    good = encode_offset_commit_value(OffsetCommitValue(1, "m", 2))
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(good[:-3])
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(struct.pack(">h", 9) + good[2:])
    with pytest.raises(CorruptRecordError):
        decode_key(b"\x00")


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("hello", 99162322),
    ("console-consumer-12345", java_string_hash("console-consumer-12345")),
    ("polygenelubricants", -(2**31)),  # the famous Integer.MIN_VALUE hash
    ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 code units
    ("é", 233),
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_java_string_hash_wraps_like_a_java_int() -> None:
    # "aaaaaaaa" overflows 32 bits: 31-based hash computed with explicit wrapping
    h = 0
    for c in "aaaaaaaa":
        h = (31 * h + ord(c)) % 2**32
    assert java_string_hash("aaaaaaaa") == (h - 2**32 if h >= 2**31 else h)


def test_partition_uses_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("consumer-group-abc") == -2689283
    assert partition_for("consumer-group-abc", 50) == 2689283 % 50
