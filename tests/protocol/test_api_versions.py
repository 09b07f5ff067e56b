"""ApiSet advertisement, ApiVersions responses of every version, the unsupported-version reply."""

from __future__ import annotations

import warnings

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3

from spark_log.protocol.api_table import API_TABLE
from spark_log.protocol.api_versions import (
    ApiSet,
    ApiVersionRange,
    encode_api_versions_unsupported,
    is_valid_client_software,
)
from spark_log.protocol.codec import decode_response, encode_response
from spark_log.protocol.errors import ErrorCode

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

SERVED = [18, 3, 0, 1]


def test_only_served_keys_are_advertised_in_key_order():
    ranges = ApiSet(SERVED).ranges
    assert [r.api_key for r in ranges] == sorted(SERVED)


def test_ranges_come_from_the_table():
    for entry in ApiSet(SERVED).ranges:
        spec = API_TABLE[entry.api_key]
        assert entry == ApiVersionRange(spec.key, spec.advertised_min_version, spec.max_version)


def test_produce_is_listed_from_v0_but_accepted_from_v3():
    apis = ApiSet([0])
    assert apis.ranges[0].min_version == 0
    assert not apis.accepts(0, 2)
    assert apis.accepts(0, 3)


def test_topic_ids_raise_the_fetch_ceiling():
    without = ApiSet([1]).ranges[0].max_version
    with_ids = ApiSet([1], topic_ids=True).ranges[0].max_version
    assert without == API_TABLE[1].max_version < with_ids == API_TABLE[1].topic_id_max_version
    assert ApiSet([1], topic_ids=True).accepts(1, with_ids)
    assert not ApiSet([1]).accepts(1, with_ids)


def test_caps_lower_a_range():
    apis = ApiSet([10], caps={10: 3})
    assert apis.ranges[0].max_version == 3
    assert apis.accepts(10, 3) and not apis.accepts(10, 4)


def test_keys_not_served_are_not_accepted():
    assert not ApiSet([18]).accepts(3, 1)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"keys": [17]}, "not in the protocol table"),
        ({"keys": [3], "caps": {1: 5}}, "not served"),
        ({"keys": [1], "caps": {1: 2}}, "below its minimum"),
    ],
)
def test_bad_configuration_is_refused(kwargs, reason):
    with pytest.raises(ValueError, match=reason):
        ApiSet(**kwargs)


@pytest.mark.parametrize("version", range(5))
def test_response_of_each_version_round_trips_with_the_ranges(version):
    apis = ApiSet(SERVED)
    response = apis.api_versions_response(version, throttle_time_ms=25)
    _cid, decoded = decode_response(encode_response(3, response)[4:], 18, version)
    listed = [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys]
    assert listed == [tuple(r) for r in apis.ranges]
    assert decoded.error_code == ErrorCode.none
    if version >= 1:
        assert decoded.throttle_time.total_seconds() == 0.025


def test_error_replies_list_nothing_but_unsupported_version_lists_api_versions():
    apis = ApiSet(SERVED)
    invalid = apis.api_versions_response(3, error_code=ErrorCode.invalid_request)
    unsupported = apis.api_versions_response(3, error_code=ErrorCode.unsupported_version)
    assert (invalid.error_code, invalid.api_keys) == (ErrorCode.invalid_request, ())
    assert [k.api_key for k in unsupported.api_keys] == [18]


def test_unsupported_version_reply_is_a_v0_body_listing_api_versions():
    frame = encode_api_versions_unsupported(41)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, decoded = decode_response(frame[4:], 18, 0)
    spec = API_TABLE[18]
    assert correlation_id == 41
    assert decoded.error_code == ErrorCode.unsupported_version
    listed = [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys]
    assert listed == [(18, spec.min_version, spec.max_version)]


def test_kafka_python_reads_the_unsupported_reply_whatever_version_it_asked():
    frame = encode_api_versions_unsupported(8)
    response = KpApiVersionsResponse.decode(frame, version=3, header=True, framed=True)
    assert response.error_code == ErrorCode.unsupported_version
    [entry] = response.api_keys
    assert (entry.api_key, entry.max_version) == (18, API_TABLE[18].max_version)


@pytest.mark.parametrize(
    ("name", "version", "valid"),
    [
        ("librdkafka", "2.0.2", True),
        ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
        ("a", "1", True),
        ("-bad", "1.0", False),
        ("bad-", "1.0", False),
        ("ok", "", False),
        ("sp ace", "1", False),
    ],
)
def test_client_software_check_follows_kafka(name, version, valid):
    request = ApiVersionsRequestV3(client_software_name=name, client_software_version=version)
    assert is_valid_client_software(request) is valid


def test_old_api_versions_requests_carry_nothing_to_check():
    assert is_valid_client_software(ApiVersionsRequestV0())
