"""The API table: ranges consistent with kio, and every target client negotiating batch v2 + zstd.

The client checks use each client's own rules: librdkafka's feature map (written down from its
source), and kafka-python's and aiokafka's negotiation code run against our advertised ranges.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import warnings

import aiokafka.protocol
import pytest
from aiokafka.protocol.api import Request
from kio.schema.index import api_key_map, schema_name_map

from spark_log.protocol.api_table import (
    API_TABLE,
    FLEXIBLE_CACHE_SIZE,
    flexible_from,
    is_flexible,
    spec_for,
)
from spark_log.protocol.api_versions import ApiSet
from spark_log.protocol.request_header import request_header_version

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.consumer import FetchRequest as KpFetch
    from kafka.protocol.producer import ProduceRequest as KpProduce

PRODUCE, FETCH = 0, 1
ZSTD_PRODUCE, ZSTD_FETCH = 7, 10
BATCH_V2_PRODUCE, BATCH_V2_FETCH = 3, 4

BROKER_APIS = [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24, 25]
BROKER_APIS += [26, 27, 28, 32, 33, 35, 37, 42, 43, 44, 45, 46, 47, 55, 60, 61, 65, 66]


def advertised(topic_ids: bool = False) -> dict[int, tuple[int, int]]:
    ranges = ApiSet(API_TABLE, topic_ids=topic_ids).ranges
    return {r.api_key: (r.min_version, r.max_version) for r in ranges}


def test_table_covers_every_api_the_broker_needs():
    assert sorted(API_TABLE) == sorted(BROKER_APIS)


@pytest.mark.parametrize("spec", API_TABLE.values(), ids=lambda s: s.name)
def test_every_accepted_version_has_kio_classes_for_that_key_and_version(spec):
    kio_versions = schema_name_map[spec.name]
    assert spec.advertised_min_version <= spec.min_version == min(kio_versions)
    assert spec.min_version <= spec.max_version <= spec.topic_id_max_version
    for version in range(spec.min_version, spec.topic_id_max_version + 1):
        for entity in (spec.request_type(version), spec.response_type(version)):
            assert (entity.__api_key__, entity.__version__) == (spec.key, version)
            assert entity.__flexible__ == spec.is_flexible(version)


def test_accepts_respects_the_topic_id_ceiling():
    fetch = API_TABLE[FETCH]
    assert fetch.accepts(12, topic_ids=False) and not fetch.accepts(13, topic_ids=False)
    assert fetch.accepts(13) and not fetch.accepts(3)


def test_flexible_from_knows_unserved_keys_and_not_unknown_ones():
    assert flexible_from(36) == 2  # SaslAuthenticate: not served, still known
    assert flexible_from(7) is None  # ControlledShutdown: gone from kio
    assert flexible_from(12345) is None
    assert spec_for(12345) is None


@pytest.mark.parametrize("key", sorted(api_key_map))
def test_a_version_is_flexible_exactly_from_the_first_flexible_version(key):
    name = api_key_map[key]
    first = flexible_from(key)
    for version in range(-1, max(schema_name_map[name]) + 3):  # also below and above kio's
        assert is_flexible(key, version) == (first is not None and version >= first), version
    assert not is_flexible(12345, 0)


def test_made_up_keys_and_versions_do_not_grow_the_flexibility_cache_without_end():
    # Every request's header asks, whatever key and version a client sends.
    for key in range(20_000, 25_000):
        assert request_header_version(key, key % 7) == 1
    assert is_flexible.cache_info().currsize <= FLEXIBLE_CACHE_SIZE
    assert is_flexible(FETCH, 12) and not is_flexible(FETCH, 11)  # still right after eviction


def test_a_first_request_loads_the_kio_classes_of_its_version_only():
    # Loading every version to find the first flexible one cost a fresh broker 6-50 ms at the
    # first request of each API; the classes of the version asked are loaded to decode it.
    code = ("import sys; from spark_log.protocol.request_header import request_header_version;"
            "from spark_log.protocol.response_header import response_header_version;"
            "print(request_header_version(1, 12), response_header_version(1, 12),"
            "request_header_version(0, 7), response_header_version(0, 7));"
            "print(sorted({m.split('.')[3] for m in sys.modules"
            " if m.startswith(('kio.schema.fetch.v', 'kio.schema.produce.v'))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["2 1 1 0", "['v12', 'v7']"]


def overlaps(ranges: dict[int, tuple[int, int]], key: int, low: int, high: int) -> bool:
    if key not in ranges:
        return False
    broker_low, broker_high = ranges[key]
    return broker_low <= high and low <= broker_high


# librdkafka before 2.11.1: each feature needs every listed (key, version) in the broker range.
LIBRDKAFKA_FEATURES = {
    "MsgVer2": [(PRODUCE, 3), (FETCH, 4)],
    "ZSTD": [(PRODUCE, 7), (FETCH, 10)],
    "BrokerBalancedConsumer": [(10, 0), (8, 2), (9, 1), (11, 0), (14, 0), (12, 0), (13, 0)],
    "BrokerGroupCoordinator": [(10, 0)],
    "IdempotentProducer": [(22, 0)],
    "OffsetTime": [(2, 1)],
    "ApiVersion": [(18, 0)],
}
# (client, key): highest version the client sends.
LIBRDKAFKA_MAX = {
    ("2.0.2", PRODUCE): 7,
    ("2.0.2", FETCH): 11,
    ("2.16", PRODUCE): 10,
    ("2.16", FETCH): 16,
}


@pytest.mark.parametrize("topic_ids", [False, True])
@pytest.mark.parametrize("feature", LIBRDKAFKA_FEATURES)
def test_librdkafka_2_0_2_enables_each_feature(feature, topic_ids):
    ranges = advertised(topic_ids)
    for key, version in LIBRDKAFKA_FEATURES[feature]:
        assert overlaps(ranges, key, version, version), (feature, key, version)


def test_librdkafka_2_0_2_keeps_gzip_snappy_lz4_because_produce_v0_is_listed():
    assert overlaps(advertised(), PRODUCE, 0, 0)
    assert not API_TABLE[PRODUCE].accepts(0)  # listed, yet refused like Kafka does


@pytest.mark.parametrize("client", ["2.0.2", "2.16"])
def test_librdkafka_negotiates_zstd_capable_versions(client):
    ranges = advertised()
    for key, needed in ((PRODUCE, ZSTD_PRODUCE), (FETCH, ZSTD_FETCH)):
        negotiated = min(LIBRDKAFKA_MAX[client, key], ranges[key][1])
        assert negotiated >= needed and API_TABLE[key].accepts(negotiated, topic_ids=False)


def test_kafka_python_negotiates_zstd_and_batch_v2():
    versions = BrokerVersionData(api_versions=advertised())
    produce = versions.api_version(KpProduce, max_version=9)  # its producer's cap
    fetch = versions.api_version(KpFetch, max_version=12)  # its fetcher's cap
    assert produce >= ZSTD_PRODUCE and fetch >= ZSTD_FETCH
    assert versions.broker_version >= (2, 1)  # zstd allowed, magic v2 used


def aiokafka_requests() -> dict[int, type[Request]]:
    for module in pkgutil.iter_modules(aiokafka.protocol.__path__):
        importlib.import_module(f"aiokafka.protocol.{module.name}")
    found: dict[int, type[Request]] = {}
    stack = list(Request.__subclasses__())
    while stack:
        cls = stack.pop()
        found[cls.API_KEY] = cls
        stack.extend(cls.__subclasses__())
    return found


def test_aiokafka_finds_a_version_for_every_api_it_shares_with_us():
    ranges = advertised()
    for key, request in aiokafka_requests().items():
        if key not in ranges:
            continue
        low, high = ranges[key]
        usable = [c.API_VERSION for c in request._CLASSES if low <= c.API_VERSION <= high]
        assert usable, f"aiokafka has no version of API {key} within {low}-{high}"


def test_aiokafka_negotiates_zstd_and_batch_v2():
    produce = aiokafka_requests()[PRODUCE](None, 1, 1000, []).prepare(advertised())
    fetch = aiokafka_requests()[FETCH](0, 1, 1, 0, []).prepare(advertised())
    assert produce.API_VERSION >= ZSTD_PRODUCE and fetch.API_VERSION >= ZSTD_FETCH
    assert produce.API_VERSION >= BATCH_V2_PRODUCE and fetch.API_VERSION >= BATCH_V2_FETCH
