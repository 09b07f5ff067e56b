"""The native readers of request headers, Produce and Fetch bodies (`_native_wire.c`) and the
native writer of the usual Fetch response (`_native_fetch_response.c`) agree with their
pure-Python twins, which define them: on any input, the native call returns what the twin
returns, or leaves the input to the twin (None); an input the twin refuses is always left to
it, so its error is the one raised."""

from __future__ import annotations

import importlib
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.protocol import fetch_request as fr
from spark_log.protocol import fetch_response
from spark_log.protocol import produce_request as pr
from spark_log.protocol import request_header as rh
from spark_log.protocol.api_table import spec_for
from spark_log.protocol.codec import encode_entity
from spark_log.protocol.errors import ErrorCode, ProtocolError
from tests.protocol.hand_readers import mutated
from tests.protocol.strategies import entities
from tests.protocol.test_fetch_response import FileSlice

VERSIONS = range(pr.MIN_VERSION, pr.MAX_VERSION + 1)
CHECKS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
native = importlib.import_module("spark_log.protocol._native_wire")


def test_the_extension_is_built_and_used():
    assert pr.NATIVE and rh.NATIVE and fr.NATIVE and fetch_response.NATIVE, (
        "spark_log.protocol._native_wire.c is not built: `pip install -e .` (what ./dev "
        "runs) compiles it when a C compiler and Python's headers are there")


def produce_values(request: pr.ProduceRequest) -> tuple:
    """The request with each records view as its bytes, and the types of every part."""
    assert type(request) is pr.ProduceRequest
    topics = []
    for topic in request.topic_data:
        assert type(topic) is pr.TopicProduceData and type(topic.partition_data) is tuple
        parts = []
        for p in topic.partition_data:
            assert type(p) is pr.PartitionProduceData
            assert p.records is None or type(p.records) is memoryview
            parts.append((p.index, None if p.records is None else bytes(p.records)))
        topics.append((topic.name, tuple(parts)))
    return request.transactional_id, request.acks, request.timeout_ms, tuple(topics)


def native_produce(body: bytes, flexible: bool) -> pr.ProduceRequest | None:
    return native.read_produce(memoryview(body), flexible, pr.ProduceRequest,
                               pr.TopicProduceData, pr.PartitionProduceData)


def assert_produce_twins_agree(body: bytes, version: int) -> pr.ProduceRequest | None:
    flexible = version >= pr.FIRST_FLEXIBLE
    got = native_produce(body, flexible)
    try:
        want = pr.decode_py(body, flexible, version)
    except ProtocolError:
        assert got is None  # the twin names the error
        return None
    if got is not None:
        assert produce_values(got) == produce_values(want)
    return got


def kio_type(version: int, api_key: int = 0) -> type:
    spec = spec_for(api_key)
    assert spec is not None
    return spec.request_type(version)


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data())
def test_produce_bodies_read_natively_as_the_twin_reads_them(version, data):
    body = encode_entity(data.draw(entities(kio_type(version))))
    # whatever kio writes, the native reader reads whole (none is left to the twin)
    assert assert_produce_twins_agree(body, version) is not None


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data(), changes=st.lists(st.tuples(st.integers(0), st.integers(0, 255)),
                                        max_size=6), cut=st.integers(0))
def test_mutated_produce_bodies_agree_or_are_left_to_the_twin(version, data, changes, cut):
    body = mutated(encode_entity(data.draw(entities(kio_type(version)))), changes, cut)
    assert_produce_twins_agree(body, version)


def test_produce_records_are_views_of_the_callers_view():
    body = bytearray(struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 1) + b"t"
                     + struct.pack(">ii", 1, 7) + struct.pack(">i", 3) + b"abc")
    request = native_produce(body, False)
    assert request is not None
    records = request.topic_data[0].partition_data[0].records
    body[-1:] = b"Z"
    assert bytes(records) == b"abZ"


@pytest.mark.parametrize("body, flexible", [
    (struct.pack(">h", 3) + b"\xff\xfe\xfd" + struct.pack(">hii", 1, 0, 0), False),  # not UTF-8
    (struct.pack(">hhii", -1, 1, 0, 2), False),  # two topics claimed, none there
    (struct.pack(">hhi", -1, 1, 0), False),  # no topic count
    (b"\x00\x00\x01\x00\x00\x00\x00\x80\x80\x80\x80\x80", True),  # a 6-byte varint
    (b"\x00\x00\x01\x00\x00\x00\x00\x80\x80\x80\x80\x10", True),  # a varint past 32 bits
])
def test_malformed_produce_bodies_are_left_to_the_twin(body, flexible):
    assert native_produce(body, flexible) is None
    with pytest.raises(ProtocolError):
        pr.decode_py(body, flexible, 9 if flexible else 3)


def native_fetch(body: bytes, version: int) -> fr.FetchRequest | None:
    return native.read_fetch(memoryview(body), version, fr.FetchRequest, fr.FetchTopic,
                             fr.FetchPartition, fr.ReplicaState, fr.uuid_of)


def fetch_types(request: fr.FetchRequest) -> None:
    assert type(request) is fr.FetchRequest
    for topic in request.topics + request.forgotten_topics_data:
        assert type(topic) is fr.FetchTopic and type(topic.partitions) is tuple
    for topic in request.topics:
        assert all(type(p) is fr.FetchPartition for p in topic.partitions)


def assert_fetch_twins_agree(body: bytes, version: int) -> fr.FetchRequest | None:
    got = native_fetch(body, version)
    try:
        want = fr.decode_py(body, version)
    except ProtocolError:
        assert got is None
        return None
    if got is not None:
        fetch_types(got)
        assert got == want
    return got


FETCH_VERSIONS = range(fr.MIN_VERSION, fr.MAX_VERSION + 1)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@CHECKS
@given(data=st.data())
def test_fetch_bodies_read_natively_as_the_twin_reads_them(version, data):
    request = data.draw(entities(kio_type(version, 1)))
    got = assert_fetch_twins_agree(encode_entity(request), version)
    state = getattr(request, "replica_state", None)
    partitions = [p for t in request.topics for p in t.partitions]
    tagged = version >= 12 and (
        request.cluster_id is not None
        or (state is not None and (state.replica_id, state.replica_epoch) != (-1, -1))
        or any(getattr(p, "replica_directory_id", None) is not None
               or getattr(p, "high_watermark", (1 << 63) - 1) != (1 << 63) - 1
               for p in partitions))
    if not tagged:  # whatever kio writes without tagged fields is read whole
        assert got is not None


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@CHECKS
@given(data=st.data(), changes=st.lists(st.tuples(st.integers(0), st.integers(0, 255)),
                                        max_size=6), cut=st.integers(0))
def test_mutated_fetch_bodies_agree_or_are_left_to_the_twin(version, data, changes, cut):
    body = mutated(encode_entity(data.draw(entities(kio_type(version, 1)))), changes, cut)
    assert_fetch_twins_agree(body, version)


def test_a_consumers_fetch_is_read_natively():
    topic_id = bytes(range(1, 17))
    body = (struct.pack(">iiibii", 500, 1, 52428800, 1, 0, -1) + b"\x02" + topic_id + b"\x02"
            + struct.pack(">iiqiqi", 0, 3, 1234, 2, -1, 1048576) + b"\x00\x00" + b"\x01"
            + b"\x01" + b"\x00")
    got = native_fetch(body, 15)
    assert got is not None and got == fr.decode_py(body, 15)
    assert got.topics[0].topic_id == fr.uuid_of(topic_id)
    assert got.topics[0].partitions[0].fetch_offset == 1234 and got.replica_id == -1


def header_frame(api_key: int, version: int, client_id: bytes | None, tags: bytes,
                 body: bytes) -> bytes:
    client = struct.pack(">h", -1) if client_id is None else \
        struct.pack(">h", len(client_id)) + client_id
    frame = struct.pack(">hhi", api_key, version, 12345)
    if rh.request_header_version(api_key, version) >= 1:
        frame += client
    if rh.request_header_version(api_key, version) >= 2:
        frame += tags
    return frame + body


def native_parse(frame: bytes | memoryview):
    return native.parse_request(frame, rh.RequestHeader, rh.request_header_version)


def assert_header_twins_agree(frame: bytes) -> tuple | None:
    for given_as in (frame, memoryview(frame)):
        got = native_parse(given_as)
        try:
            want = rh.parse_request_py(given_as)
        except ProtocolError:
            assert got is None
            continue
        if got is not None:
            assert type(got[0]) is rh.RequestHeader and type(got[1]) is memoryview
            assert (got[0], bytes(got[1])) == (want[0], bytes(want[1]))
    return native_parse(frame)


@CHECKS
@given(api_key=st.integers(-2, 80), version=st.integers(-1, 20),
       client_id=st.none() | st.binary(max_size=20), body=st.binary(max_size=30),
       tags=st.sampled_from([b"\x00", b"\x01\x00\x02ab", b"\x02\x01\x00\x05\x01z"]),
       changes=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4),
       cut=st.integers(0))
def test_request_headers_agree_or_are_left_to_the_twin(api_key, version, client_id, body, tags,
                                                        changes, cut):
    frame = header_frame(api_key, version, client_id, tags, body)
    assert_header_twins_agree(frame)
    assert_header_twins_agree(mutated(frame, changes, cut))


def test_a_well_formed_header_is_read_natively_with_the_body_a_view_of_the_frame():
    frame = bytearray(header_frame(0, 9, b"rdkafka", b"\x00", b"body"))
    parsed = native_parse(memoryview(frame))
    assert parsed is not None
    header, body = parsed
    assert header == rh.RequestHeader(0, 9, 12345, "rdkafka", 2)
    frame[-1:] = b"Y"
    assert bytes(body) == b"bodY"
    null_client = native_parse(header_frame(18, 3, None, b"\x00", b""))
    assert null_client is not None and null_client[0].client_id == ""


def test_the_python_readers_stand_in_when_the_extension_is_not_built():
    code = ("import sys; sys.modules['spark_log.protocol._native_wire'] = None\n"
            "from spark_log.protocol import produce_request as pr, request_header as rh\n"
            "from spark_log.protocol import fetch_request as fr\n"
            "from spark_log.protocol import fetch_response\n"
            "assert not pr.NATIVE and not rh.NATIVE and not fr.NATIVE\n"
            "assert not fetch_response.NATIVE\n"
            "assert fetch_response.encode_plain_fetch_response(1, 12, 0, 0, [])\n"
            "frame = bytes.fromhex('000000090000000700017800') + "
            "bytes.fromhex('00ffff0000753002046f6e65020000000000000000')\n"
            "header, body = rh.parse_request(frame)\n"
            "assert header == rh.RequestHeader(0, 9, 7, 'x', 2), header\n"
            "request = pr.decode_produce_request(9, body)\n"
            "assert request.topic_data[0] == pr.TopicProduceData("
            "'one', (pr.PartitionProduceData(0, None),)), request\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the usual Fetch response ----------------------------------------------------------------

class Sized:
    """A records object whose `size` may be anything an int can be."""

    def __init__(self, size: int) -> None:
        self.size = size


_ANY_INT = st.integers(-(2**64), 2**64) | st.booleans() | st.none() | st.text(max_size=2)
_RECORDS = (st.binary(max_size=30) | st.binary(max_size=30).map(FileSlice)
            | st.binary(max_size=30).map(memoryview) | st.binary(max_size=30).map(bytearray)
            | st.integers(-3, 2**32).map(Sized) | st.none())
_PARTITION = st.fixed_dictionaries({
    "partition_index": _ANY_INT, "error_code": _ANY_INT | st.sampled_from(list(ErrorCode)),
    "high_watermark": _ANY_INT, "last_stable_offset": _ANY_INT, "log_start_offset": _ANY_INT,
    "aborted_transactions": st.none() | st.lists(st.fixed_dictionaries(
        {"producer_id": _ANY_INT, "first_offset": _ANY_INT}), max_size=2),
    "preferred_read_replica": _ANY_INT, "records": _RECORDS,
})
_TOPICS = st.lists(st.fixed_dictionaries({
    "topic": st.text(max_size=8) | st.none(), "topic_id": st.uuids() | st.none(),
    "partitions": st.lists(_PARTITION, max_size=3)}), max_size=3)


def python_parts(*args) -> list | None:
    try:
        return fetch_response.encode_plain_py(*args)
    except Exception:  # the error is the Python writer's to raise
        return None


@CHECKS
@given(topics=_TOPICS, correlation_id=_ANY_INT, version=st.integers(2, 19),
       error_code=_ANY_INT, session_id=_ANY_INT)
def test_fetch_responses_written_natively_as_the_twin_writes_them(topics, correlation_id,
                                                                  version, error_code,
                                                                  session_id):
    args = (correlation_id, version, error_code, session_id, topics)
    got = native.encode_plain_fetch(*args)
    want = python_parts(*args)
    if want is None:
        assert got is None
    elif got is not None:
        assert [type(p) for p in got] == [type(p) for p in want]
        assert [p if type(p) is bytes else id(p) for p in got] == \
            [p if type(p) is bytes else id(p) for p in want]


@pytest.mark.parametrize("version", range(4, 19))
def test_a_usual_fetch_response_is_written_natively(version):
    records = FileSlice(b"x" * 70)
    topics = [{"topic": "t", "topic_id": fr.uuid_of(bytes(range(16))), "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": 9,
         "last_stable_offset": 9, "log_start_offset": 0, "aborted_transactions": None,
         "preferred_read_replica": -1, "records": records},
        {"partition_index": 1, "error_code": ErrorCode.none, "high_watermark": 3,
         "last_stable_offset": 3, "log_start_offset": 0,
         "aborted_transactions": [{"producer_id": 7, "first_offset": 2}],
         "preferred_read_replica": -1, "records": b""}]}]
    got = native.encode_plain_fetch(5, version, ErrorCode.none, 0, topics)
    assert got is not None and got == fetch_response.encode_plain_py(5, version, ErrorCode.none,
                                                                    0, topics)
    assert got[1] is records
