"""Interop with an independent implementation: kafka-python 3.0's protocol classes.

kafka-python encodes from Kafka's own message JSON, so it checks our codecs against a second
reading of the spec: requests it frames decode here, responses we frame decode there, and for
every API version the two agree byte for byte.
"""

from __future__ import annotations

import datetime
import importlib
import pkgutil
import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.api_versions import ApiSet
from spark_log.protocol.codec import (
    decode_request_body,
    encode_entity,
    encode_request,
    encode_response,
)
from spark_log.protocol.errors import ErrorCode
from spark_log.protocol.fetch_response import encode_fetch_response
from spark_log.protocol.framing import FrameDecoder
from spark_log.protocol.request_header import parse_request
from tests.protocol.strategies import all_messages, entities

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer import (
        FetchRequest,
        FetchResponse,
        JoinGroupRequest,
        OffsetCommitRequest,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        MetadataRequest,
    )
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    for _package in ("producer", "consumer", "metadata", "admin"):
        _module = importlib.import_module(f"kafka.protocol.{_package}")
        for _sub in pkgutil.iter_modules(_module.__path__):
            importlib.import_module(f"kafka.protocol.{_package}.{_sub.name}")

CROSS_CHECK = settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


def kafka_python_classes() -> tuple[dict[int, type], dict[int, type]]:
    requests: dict[int, type] = {}
    responses: dict[int, type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and "_json" in vars(cls):
            (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    return requests, responses


KP_REQUESTS, KP_RESPONSES = kafka_python_classes()


def their_bytes(kp_class: type, ours: bytes, version: int) -> bytes:
    """Decode `ours` with kafka-python and encode it again with kafka-python."""
    decoded = kp_class.decode(ours, version=version)
    decoded._header = None  # decode() bypasses __init__, encode() reads it
    return bytes(decoded.encode(version=version))


@pytest.mark.parametrize(("api_key", "version"), all_messages())
def test_requests_agree_byte_for_byte(api_key, version):
    @CROSS_CHECK
    @given(entities(API_TABLE[api_key].request_type(version)))
    def check(request):
        ours = encode_entity(request)
        assert their_bytes(KP_REQUESTS[api_key], ours, version) == ours

    check()


@pytest.mark.parametrize(("api_key", "version"), all_messages())
def test_responses_agree_byte_for_byte(api_key, version):
    @CROSS_CHECK
    @given(entities(API_TABLE[api_key].response_type(version)))
    def check(response):
        if api_key == 18 and response.error_code != ErrorCode.none:
            return  # kafka-python reads every failed ApiVersions reply as v0, like Kafka
        ours = encode_entity(response)
        assert their_bytes(KP_RESPONSES[api_key], ours, version) == ours

    check()


def decode_theirs(request, correlation_id: int = 31, client_id: str = "kafka-python-3"):
    """Frame `request` with kafka-python, then split and decode it with our code."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    [frame] = FrameDecoder(1 << 24).feed(bytes(request.encode(header=True, framed=True)))
    header, body = parse_request(frame)
    assert (header.api_key, header.api_version) == (request.API_KEY, request.API_VERSION)
    assert (header.correlation_id, header.client_id) == (correlation_id, client_id)
    return header, decode_request_body(header, body)


def record_batch() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[("h", b"1")])
    builder.close()
    return bytes(builder.buffer())


@pytest.mark.parametrize("version", [3, 7, 9, 11])
def test_produce_request_from_kafka_python(version):
    batch = record_batch()
    topic = ProduceRequest.TopicProduceData(
        name="events",
        partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=batch)
        ],
    )
    request = ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[topic]
    )
    header, decoded = decode_theirs(request)
    [topic_data] = decoded.topic_data
    [partition] = topic_data.partition_data
    assert (topic_data.name, partition.index, partition.records) == ("events", 2, batch)
    assert decoded.acks == -1 and decoded.timeout.total_seconds() == 30
    assert encode_request(header.correlation_id, header.client_id, decoded) == bytes(
        request.encode(header=True, framed=True)
    )


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_request_from_kafka_python(version):
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=42, partition_max_bytes=1 << 20
    )
    request = FetchRequest[version](
        max_wait_ms=500,
        min_bytes=1,
        topics=[FetchRequest.FetchTopic(topic="events", partitions=[partition])],
        forgotten_topics_data=[],
    )
    _header, decoded = decode_theirs(request)
    [topic] = decoded.topics
    assert topic.topic == "events" and topic.partitions[0].fetch_offset == 42


def test_metadata_api_versions_find_coordinator_join_group_offset_commit():
    _, metadata = decode_theirs(
        MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name="events")],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert [t.name for t in metadata.topics] == ["events"]
    _, api_versions = decode_theirs(
        ApiVersionsRequest[3](client_software_name="kafka-python", client_software_version="3.0")
    )
    assert api_versions.client_software_name == "kafka-python"
    _, coordinator = decode_theirs(FindCoordinatorRequest[4](key_type=0, coordinator_keys=["g1"]))
    assert coordinator.coordinator_keys == ("g1",)
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")
    _, join = decode_theirs(
        JoinGroupRequest[7](
            group_id="g1",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
            member_id="",
            protocol_type="consumer",
            protocols=[protocol],
        )
    )
    assert (join.group_id, join.protocols[0].metadata) == ("g1", b"\x00\x01")
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=99, committed_metadata=None
    )
    _, commit = decode_theirs(
        OffsetCommitRequest[8](
            group_id="g1",
            generation_id_or_member_epoch=1,
            member_id="m",
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name="events", partitions=[partition])
            ],
        )
    )
    assert commit.topics[0].partitions[0].committed_offset == 99


@pytest.mark.parametrize("version", range(5))
def test_kafka_python_reads_our_api_versions_response(version):
    apis = ApiSet(API_TABLE)
    frame = encode_response(99, apis.api_versions_response(version))
    response = ApiVersionsResponse.decode(frame, version=version, header=True, framed=True)
    assert response.header.correlation_id == 99
    listed = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert listed == [tuple(r) for r in apis.ranges]


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_kafka_python_reads_our_zero_copy_fetch_response(version):
    batch = record_batch()
    module = importlib.import_module(API_TABLE[1].response_type(version).__module__)
    partition = module.PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=1,
        aborted_transactions=None,
        records=batch,
    )
    values = {"throttle_time": datetime.timedelta(0)}
    if version >= 7:
        values["error_code"] = ErrorCode.none
    topic = module.FetchableTopicResponse(topic="events", partitions=(partition,))
    response = module.FetchResponse(responses=(topic,), **values)
    frame = b"".join(encode_fetch_response(5, response))
    theirs = FetchResponse.decode(frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 5
    [their_topic] = theirs.responses
    assert their_topic.topic == "events"
    assert bytes(their_topic.partitions[0].records) == batch
