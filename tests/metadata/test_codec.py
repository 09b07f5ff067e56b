"""The metadata record codec: round trips of every record type and version, byte vectors worked
out from Kafka's schemas and bytes of a log Kafka wrote, and damaged inputs that must raise
RecordDecodeError naming what is wrong."""

from __future__ import annotations

import contextlib
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.metadata.codec import (
    _Reader,
    decode_record,
    decode_record_and_version,
    encode_record,
)
from spark_log.metadata.errors import RecordDecodeError, RecordEncodeError
from spark_log.metadata.read_plan import read_plan
from spark_log.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.metadata.strategies import (
    all_record_versions,
    any_record,
    for_every_record_version,
    records,
)

TOPIC_ID = UUID("bfd99e5e-3235-4552-81f8-d4af1741970c")
ID_HEX = TOPIC_ID.hex


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# ---- round trips -----------------------------------------------------------------------------

@for_every_record_version
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_record_type_and_version_round_trips(record_type, version, data):
    record = data.draw(records(record_type, version))
    encoded = encode_record(record, version)
    assert decode_record_and_version(encoded) == (record, version)
    assert encode_record(decode_record(encoded), version) == encoded


def test_records_default_to_their_highest_version():
    for record_type, _version in all_record_versions():
        encoded = encode_record(record_type())
        assert encoded[2] == record_type.HIGHEST_VERSION
        assert decode_record(encoded) == record_type()


# ---- byte vectors from the schemas ----------------------------------------------------------

VECTORS = [
    # frame 1, NoOpRecord (20) v0, no fields, no tags
    (NoOpRecord(), 0, "01 14 00 00"),
    # FenceBrokerRecord (7) v0: id int32 3, epoch int64 9, no tags
    (FenceBrokerRecord(id=3, epoch=9), 0, "01 07 00 00000003 0000000000000009 00"),
    # TopicRecord (2) v0: name compact string (length + 1), topic id, no tags
    (TopicRecord(name="foo", topic_id=TOPIC_ID), 0, f"01 02 00 04 666f6f {ID_HEX} 00"),
    # ConfigRecord (4) v0: resource type 2 (topic), name "t", config "a", value null (0)
    (ConfigRecord(resource_type=2, resource_name="t", name="a", value=None), 0,
     "01 04 00 02 02 74 02 61 00 00"),
    # PartitionChangeRecord (5) v0: partition 7, topic; tags 0 (isr [1, 2]) and 1 (leader 1)
    (PartitionChangeRecord(partition_id=7, topic_id=TOPIC_ID, isr=(1, 2), leader=1), 0,
     f"01 05 00 00000007 {ID_HEX} 02 00 09 03 00000001 00000002 01 04 00000001"),
    # leader -1 differs from the default -2 (no change), so it is written
    (PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=-1), 0,
     f"01 05 00 00000000 {ID_HEX} 01 01 04 ffffffff"),
    # an empty ISR differs from null: tag 0 holds the empty compact array (1)
    (PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=()), 0,
     f"01 05 00 00000000 {ID_HEX} 01 00 01 01"),
    # PartitionRecord (3) v0: replicas [1, 2], isr [1], no removing/adding, leader 1, leader
    # recovery state 1 as tag 0 (after the untagged fields), epochs 4 and 5
    (PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1,), leader=1,
                     leader_recovery_state=1, leader_epoch=4, partition_epoch=5), 0,
     f"01 03 00 00000000 {ID_HEX} 03 00000001 00000002 02 00000001 01 01 00000001"
     " 00000004 00000005 01 00 01 01"),
    # RegisterBrokerRecord (0) v0: id 1, incarnation, epoch 2, one endpoint (name, host,
    # port uint16 9092 = 0x2384, protocol int16 0, its own empty tags), no features, rack null,
    # fenced true; v0 has neither is_migrating_zk_broker nor in_controlled_shutdown
    (RegisterBrokerRecord(broker_id=1, incarnation_id=TOPIC_ID, broker_epoch=2,
                          end_points=(BrokerEndpoint(name="P", host="h", port=9092),),
                          rack=None), 0,
     f"01 00 00 00000001 {ID_HEX} 0000000000000002 02 02 50 02 68 2384 0000 00 01 00 01 00"),
    # v3 adds log dirs as tag 0 when not empty, after v1's in_controlled_shutdown and v2's
    # is_migrating_zk_broker (which comes right after the broker id)
    (RegisterBrokerRecord(broker_id=1, incarnation_id=TOPIC_ID, broker_epoch=2, rack="r",
                          fenced=False, in_controlled_shutdown=True, log_dirs=(TOPIC_ID,)), 3,
     f"01 00 03 00000001 00 {ID_HEX} 0000000000000002 01 01 02 72 00 01"
     f" 01 00 11 02 {ID_HEX}"),
    # BrokerRegistrationChangeRecord (17) v1: fenced -1 (unfenced) as tag 0
    (BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=3, fenced=-1), 1,
     "01 11 01 00000002 0000000000000003 01 00 01 ff"),
]


@pytest.mark.parametrize(("record", "version", "hex_bytes"), VECTORS)
def test_byte_vectors_worked_out_from_the_schemas(record, version, hex_bytes):
    assert encode_record(record, version).hex() == unhex(hex_bytes).hex()
    assert decode_record_and_version(unhex(hex_bytes)) == (record, version)


# Record values of a __cluster_metadata log written by Kafka 3.8 (its bootstrap records and a
# topic "foo" with one partition), as published with the build-your-own-Kafka project's log
# decoder tests.
KAFKA_WRITTEN = [
    ("010c00116d657461646174612e76657273696f6e001400",
     FeatureLevelRecord(name="metadata.version", feature_level=20), 0),
    ("01020004666f6fbfd99e5e3235455281f8d4af1741970c00",
     TopicRecord(name="foo", topic_id=TOPIC_ID), 0),
    ("01030100000000bfd99e5e3235455281f8d4af1741970c020000000102000000010101000000010000000000"
     "000000020224973cbadd44cf874445a99619da3400",
     PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1,
                     leader_epoch=0, partition_epoch=0,
                     directories=(UUID("0224973c-badd-44cf-8744-45a99619da34"),)), 1),
]


@pytest.mark.parametrize(("hex_bytes", "record", "version"), KAFKA_WRITTEN)
def test_reads_and_rewrites_what_kafka_wrote(hex_bytes, record, version):
    assert decode_record_and_version(unhex(hex_bytes)) == (record, version)
    assert encode_record(record, version) == unhex(hex_bytes)


def test_the_bootstrap_transaction_markers_kafka_writes_decode():
    assert decode_record(unhex("01170001001212426f6f747374726170207265636f726473")).name == (
        "Bootstrap records")
    assert type(decode_record(unhex("01180000"))).__name__ == "EndTransactionRecord"
    assert decode_record(unhex("0115000000")).zk_migration_state == 0


# ---- damaged input --------------------------------------------------------------------------

DAMAGED = [
    ("", "frame version"),
    ("00 02 00 00", "frame version 0"),
    ("0f", "unknown frame version 15"),
    ("80 80 80 80 80 80", "frame version"),
    ("01 80 80 80 80 80 80", "type"),
    ("01 08 80 80 80 80 80", "version"),
    ("01 08 ff ff ff 7f", "version 268435455 is too large"),
    ("01 ff 7f 00", "unknown metadata record type 16383"),
    ("01 13 00 00", "unknown metadata record type 19"),
    ("01 02 01 00", "unknown version 1 of TopicRecord"),
    ("01 00 00 80", "RegisterBrokerRecord v0: broker_id"),
    (f"01 02 00 04 666f6f {ID_HEX} 00 00", "1 byte(s) left after the record"),
    (f"01 02 00 04 666f {ID_HEX}", "TopicRecord v0"),
    (f"01 02 00 00 {ID_HEX} 00", "TopicRecord v0: name: UnexpectedNull"),
    (f"01 02 00 03 ffff {ID_HEX} 00", "TopicRecord v0: name: InvalidUnicode"),
    (f"01 03 00 00000000 {ID_HEX} 00", "PartitionRecord v0: replicas: null"),
    (f"01 03 00 00000000 {ID_HEX} ff ff ff 0f", "replicas: 33554430 elements announced"),
    (f"01 03 00 00000000 {ID_HEX} 04 00000001 0000", "PartitionRecord v0: replicas: Buffer"),
    (f"01 05 00 00000000 {ID_HEX} 01 00 09 03 00000001", "tag 0: 9 bytes announced"),
    (f"01 05 00 00000000 {ID_HEX} 01 01 05 00000001 00", "tagged value of 5 bytes holds 4"),
    ("01 0c 00 02 61 0001 02 05 00", "FeatureLevelRecord v0: tag: truncated tag"),
    ("01 07 00 00000001 00000000000001", "FenceBrokerRecord v0: epoch: BufferUnderflow"),
    (f"01 00 00 00000001 {ID_HEX} 0000000000000002 01 01 00 02 00", "fenced: ValueError"),
]


@pytest.mark.parametrize(("hex_bytes", "message"), DAMAGED)
def test_damaged_values_raise_one_error_naming_the_problem(hex_bytes, message):
    with pytest.raises(RecordDecodeError) as caught:
        decode_record(unhex(hex_bytes))
    assert message in str(caught.value)


def test_every_cut_of_a_record_is_an_error():
    encoded = encode_record(RegisterBrokerRecord(
        broker_id=1, broker_epoch=2, end_points=(BrokerEndpoint(name="P", host="h"),),
        log_dirs=(TOPIC_ID,)))
    for cut in range(len(encoded)):
        with pytest.raises(RecordDecodeError):
            decode_record(encoded[:cut])


def test_unknown_tags_are_skipped_as_kafka_skips_them():
    record = TopicRecord(name="foo", topic_id=TOPIC_ID)
    with_unknown_tag = unhex(f"01 02 00 04 666f6f {ID_HEX} 01 07 02 abcd")
    assert decode_record(with_unknown_tag) == record


def test_a_string_longer_than_a_java_short_is_refused_both_ways():
    with pytest.raises(RecordEncodeError, match="more than 32767 bytes"):
        encode_record(TopicRecord(name="x" * 0x8000))
    encoded = encode_record(TopicRecord(name="x" * 0x7FFF))
    assert decode_record(encoded).name == "x" * 0x7FFF
    long_name = b"\x01\x02\x00\x81\x80\x02" + b"x" * 0x8000 + bytes(17)
    with pytest.raises(RecordDecodeError, match="more than 32767 bytes"):
        decode_record(long_name)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(any_record(), st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)),
                              max_size=4), st.integers(min_value=0))
def test_mutated_values_decode_or_raise_record_decode_error(record_and_version, changes, cut):
    record, version = record_and_version
    data = bytearray(encode_record(record, version))
    for position, value in changes:
        data[position % len(data)] = value
    with contextlib.suppress(RecordDecodeError):  # anything else fails the test
        decode_record(bytes(data[: cut % (len(data) + 1)]))


PARTITION_RECORDS = st.one_of(*(
    st.tuples(records(record_type, version), st.just(version))
    for record_type in (PartitionRecord, PartitionChangeRecord)
    for version in range(record_type.HIGHEST_VERSION + 1)))


def test_partition_records_have_the_fast_reader():
    for record_type in (PartitionRecord, PartitionChangeRecord):
        for version in range(record_type.HIGHEST_VERSION + 1):
            assert read_plan(record_type, version).fast is not None
    assert read_plan(TopicRecord, 0).fast is None  # a string: read field by field


BYTE = st.one_of(st.sampled_from([0, 1, 2, 4, 5, 0x7F, 0x80, 0x81, 0xFF]), st.integers(0, 255))


@FUZZ
@given(PARTITION_RECORDS, st.lists(st.tuples(st.integers(min_value=0), BYTE), max_size=3),
       st.integers(min_value=0), st.binary(max_size=3))
def test_the_fast_reader_reads_only_what_the_field_by_field_reader_reads_alike(
        record_and_version, changes, cut, extra):
    record, version = record_and_version
    data = bytearray(encode_record(record, version))
    for position, value in changes:
        data[3 + position % (len(data) - 3)] = value  # the header stays: this type and version
    view = memoryview(bytes(data[: 3 + cut % (len(data) - 2)]) + extra)
    fast = read_plan(type(record), version).fast(view, 3)
    reader = _Reader(view, 3, "the field-by-field reader")
    try:
        expected = reader.struct(type(record), version)
    except RecordDecodeError:
        expected = None
    if reader.pos != len(view):
        expected = None  # bytes left over: the codec refuses the record
    assert fast == expected or (fast is None and expected is not None)
    if view == encode_record(record, version):
        assert fast == record  # unchanged bytes take the fast path


def test_what_the_fast_reader_declines_is_read_field_by_field():
    # 200 replicas: a count of two varint bytes; an unknown tag of 200 bytes
    record = PartitionChangeRecord(topic_id=TOPIC_ID, partition_id=3, isr=tuple(range(200)),
                                   leader=7)
    encoded = encode_record(record, 2)
    assert read_plan(PartitionChangeRecord, 2).fast(memoryview(encoded), 3) is None
    assert decode_record(encoded) == record
    plain = encode_record(PartitionChangeRecord(topic_id=TOPIC_ID, leader=7), 0)
    assert plain[-7:] == bytes.fromhex("01 01 04 00000007")  # one tag: the leader
    unknown_tag = plain[:-7] + bytes.fromhex("02 01 04 00000007 09 8101") + bytes(129)
    assert decode_record(unknown_tag) == PartitionChangeRecord(topic_id=TOPIC_ID, leader=7)
    too_long = plain[:-7] + bytes.fromhex("01 01 05 00000007 00")  # the leader's size says 5
    with pytest.raises(RecordDecodeError, match="tagged value of 5 bytes holds 4"):
        decode_record(too_long)


# ---- encoding errors ------------------------------------------------------------------------

@pytest.mark.parametrize(("record", "version", "message"), [
    (RegisterBrokerRecord(log_dirs=(TOPIC_ID,)), 2, "v2 has no field log_dirs"),
    (RegisterBrokerRecord(in_controlled_shutdown=True), 0, "v0 has no field in_controlled"),
    (PartitionRecord(directories=(TOPIC_ID,)), 0, "v0 has no field directories"),
    (PartitionChangeRecord(eligible_leader_replicas=()), 1, "no field eligible_leader"),
    (TopicRecord(), 1, "TopicRecord has no version 1"),
    (FenceBrokerRecord(id=2**31), 0, "FenceBrokerRecord v0: id: 2147483648 does not fit"),
    (BrokerRegistrationChangeRecord(fenced=200), 2, "fenced: 200 does not fit a int8"),
    (RegisterBrokerRecord(end_points=(BrokerEndpoint(port=70000),)), 3, "end_points[0]: port"),
    (TopicRecord(name=None), 0, "name may not be null"),  # type: ignore[arg-type]
    (TopicRecord(topic_id="x"), 0, "topic_id: 'x' is not a uuid"),  # type: ignore[arg-type]
    (PartitionRecord(replicas=(True,)), 2, "replicas[0]: True is not a int32"),
])
def test_records_that_cannot_be_written_raise_record_encode_error(record, version, message):
    with pytest.raises(RecordEncodeError) as caught:
        encode_record(record, version)
    assert message in str(caught.value)


def test_only_metadata_records_encode():
    with pytest.raises(RecordEncodeError, match="not a metadata record"):
        encode_record(BrokerEndpoint())  # type: ignore[arg-type]
