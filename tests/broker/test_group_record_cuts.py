"""__consumer_offsets keys and values cut short or with bad varints: every decoder raises its
own CorruptRecordError naming the record, never a struct, index or protocol error."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from spark_log.broker.group import group_metadata_records as gm
from spark_log.protocol.errors import ProtocolError
from spark_log.records import CorruptRecordError

MEMBER = gm.MemberMetadata("m-1", "instance-1", "client", "/127.0.0.1", 300_000, 10_000,
                           b"sub", b"asg")


def _compact(text: str) -> bytes:
    """A compact string of fewer than 127 bytes: length+1 as one varint byte, then the bytes."""
    data = text.encode()
    return bytes([len(data) + 1]) + data


def _offset_commit_v4() -> bytes:
    """Kafka's first flexible OffsetCommitValue, with one tagged field (tag 0, 2 bytes)."""
    return (struct.pack(">hqi", 4, 12, 3) + _compact("meta") + struct.pack(">q", 78)
            + bytes([1, 0, 2]) + b"\xab\xcd")


def _group_metadata_v4() -> bytes:
    """A flexible GroupMetadataValue with one member; compact lengths and empty tag sections."""
    member = (_compact("m-1") + _compact("instance-1") + _compact("client") + _compact("/h")
              + struct.pack(">ii", 300_000, 10_000) + _compact("sub") + _compact("asg")
              + bytes([0]))
    return (struct.pack(">h", 4) + _compact("consumer") + struct.pack(">i", 4)
            + _compact("range") + _compact("m-1") + struct.pack(">q", 1_700_000_000_123)
            + bytes([2]) + member + bytes([0]))


CASES: dict[str, tuple[Callable[[bytes], object], bytes, str]] = {
    "offset commit key": (gm.decode_key, gm.encode_key(gm.OffsetCommitKey("g", "orders", 3)),
                          "__consumer_offsets key"),
    "group metadata key": (gm.decode_key, gm.encode_key(gm.GroupMetadataKey("group-1")),
                           "__consumer_offsets key"),
    "offset commit value v3": (
        gm.decode_offset_commit_value,
        gm.encode_offset_commit_value(gm.OffsetCommitValue(9, "meta", 100, leader_epoch=2)),
        "OffsetCommitValue"),
    "offset commit value v1": (
        gm.decode_offset_commit_value,
        gm.encode_offset_commit_value(gm.OffsetCommitValue(9, "", 100, expire_timestamp=200)),
        "OffsetCommitValue"),
    "offset commit value v4": (gm.decode_offset_commit_value, _offset_commit_v4(),
                               "OffsetCommitValue"),
    "group metadata value v3": (
        gm.decode_group_metadata_value,
        gm.encode_group_metadata_value(
            gm.GroupMetadataValue("consumer", 4, "range", "m-1", 1_700_000_000_123, (MEMBER,))),
        "GroupMetadataValue"),
    "group metadata value v4": (gm.decode_group_metadata_value, _group_metadata_v4(),
                                "GroupMetadataValue"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_whole_record_decodes(case: str) -> None:
    decode, data, _ = CASES[case]
    decode(data)  # the fixture itself is valid, so every cut below is what fails


@pytest.mark.parametrize("case", list(CASES))
def test_a_record_cut_at_any_byte_is_a_corrupt_record(case: str) -> None:
    decode, data, what = CASES[case]
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError) as raised:
            decode(data[:cut])
        assert not isinstance(raised.value, ProtocolError)
        assert str(raised.value).startswith(f"{what}: "), (cut, str(raised.value))
        assert "truncated" in str(raised.value), (cut, str(raised.value))


def test_a_varint_longer_than_five_bytes_is_a_corrupt_record() -> None:
    data = struct.pack(">hqi", 4, 12, 3) + b"\x80" * 6 + b"\x01"
    with pytest.raises(CorruptRecordError, match=r"^OffsetCommitValue: .*varint"):
        gm.decode_offset_commit_value(data)


def test_a_varint_beyond_32_bits_is_a_corrupt_record() -> None:
    data = struct.pack(">h", 4) + b"\xff\xff\xff\xff\x7f"
    with pytest.raises(CorruptRecordError, match=r"^GroupMetadataValue: .*32 bits"):
        gm.decode_group_metadata_value(data)


def test_a_tagged_field_longer_than_the_value_is_a_corrupt_record() -> None:
    data = _offset_commit_v4()[:-5] + bytes([1, 0, 9]) + b"\xab"  # 9 bytes promised, 1 given
    with pytest.raises(CorruptRecordError, match=r"^OffsetCommitValue: truncated"):
        gm.decode_offset_commit_value(data)


def test_a_negative_string_length_other_than_null_is_a_corrupt_record() -> None:
    data = struct.pack(">hqih", 3, 9, 2, -5)
    with pytest.raises(CorruptRecordError, match=r"^OffsetCommitValue: "):
        gm.decode_offset_commit_value(data)
