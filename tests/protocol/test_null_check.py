"""check_non_null: null allowed only where the schema says nullable, at any depth."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from spark_log.protocol.errors import ErrorCode, ProtocolError
from spark_log.protocol.null_check import check_non_null
from tests.protocol.strategies import entities


@settings(max_examples=50, deadline=None)
@given(entities(FetchResponse))
def test_entities_built_to_the_schema_pass(entity):
    check_non_null(entity)


def test_nullable_array_may_be_null():
    check_non_null(MetadataRequest(topics=None, include_topic_authorized_operations=False))


def test_null_top_level_array_is_rejected():
    request = ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1), topic_data=None
    )
    with pytest.raises(ProtocolError, match=r"ProduceRequest\.topic_data was null"):
        check_non_null(request)


def test_null_array_deep_inside_is_rejected():
    topic = TopicProduceData(name="t", partition_data=None)
    request = ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1), topic_data=(topic,)
    )
    with pytest.raises(ProtocolError, match=r"TopicProduceData\.partition_data was null"):
        check_non_null(request)


def test_nullable_records_and_aborted_transactions_may_be_null():
    partition = PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=0,
        aborted_transactions=None,
        records=None,
    )
    response = FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(FetchableTopicResponse(topic="t", partitions=(partition,)),),
    )
    check_non_null(response)
    check_non_null(PartitionProduceData(index=0, records=None))
