"""The APIs this layer speaks: key, name, version range, kio entity classes, flexibility.

A version range here is a promise: every version in it decodes and encodes, and its semantics
are ones the broker can honour without features it does not have. `ApiSpec.max_version` holds
when the broker has no topic IDs; `topic_id_max_version` when it assigns them (see
`api_versions.ApiSet`). Versions are Kafka 4.x's, capped where a later version only adds
something we do not implement:

====  ======================  =========  ==========  =============================================
key   API                     versions   with IDs    why the cap
====  ======================  =========  ==========  =============================================
0     Produce                 3-11 (*)   3-11        v12 is v11 + transactions v2 (KIP-890)
1     Fetch                   4-12       4-18        v13+ name topics by ID
2     ListOffsets             1-7        1-7         v8-11: tiered-storage timestamps -4/-5/-6
3     Metadata                0-13       0-13        v10+ carry topic IDs (zero UUID when none)
8     OffsetCommit            2-9        2-10        v10 names topics by ID
9     OffsetFetch             1-9        1-10        v10 names topics by ID
10    FindCoordinator         0-5        0-5         v6 adds share groups (KIP-932)
22    InitProducerId          0-5        0-5         v6 is two-phase commit (KIP-939)
24    AddPartitionsToTxn      0-3        0-3         v4+ are broker-to-broker verification
26    EndTxn                  0-4        0-4         v5 is transactions v2 (epoch bump per txn)
27    WriteTxnMarkers         1-1        1-1         v2 carries the transaction version (KIP-1228)
28    TxnOffsetCommit         0-4        0-4         v5 is transactions v2
====  ======================  =========  ==========  =============================================

Every other API below is advertised over kio's full range (= Kafka 4.x's). kio starts several
APIs above v0 because Kafka 4.0 removed the old versions (KIP-896).

(*) Produce is advertised from v0, exactly as Kafka 4.x does (KAFKA-18659): librdkafka before
2.11.1 enables gzip/snappy/lz4 only if the broker lists Produce v0; v0-2 requests are refused.

What each client needs (read from their sources; "uses" = the highest version it sends):

* librdkafka 2.0.2 (kcat in Debian bookworm): ApiVersions v3, retried as v0. Before 2.11.1 a
  feature needs each listed version inside our range: record batch v2 needs Produce v3 and Fetch
  v4; zstd needs Produce v7 and Fetch
  v10; gzip/snappy/lz4 need Produce v0 advertised. Its consumer-group feature needs
  FindCoordinator/JoinGroup/SyncGroup/Heartbeat/LeaveGroup v0, OffsetCommit v1-2 and OffsetFetch
  v1; idempotence needs InitProducerId v0; timestamps need ListOffsets v1. Uses: Produce 7,
  Fetch 11, Metadata 4, ListOffsets 2, OffsetCommit/OffsetFetch 7, FindCoordinator 2, JoinGroup
  5, SyncGroup/Heartbeat 3, LeaveGroup 1, List/DescribeGroups 4, InitProducerId 4, EndTxn 1,
  TxnOffsetCommit 3, Add*ToTxn 0, CreateTopics 4, DeleteTopics/DeleteRecords/DescribeConfigs/
  DeleteGroups 1, CreatePartitions/AlterConfigs/OffsetDelete 0.
* librdkafka 2.15-2.16 (confluent-kafka 2.16): same feature checks, open-ended. Uses: Produce
  10, Fetch 16 (12 unless every topic has a non-zero ID), Metadata 13, ListOffsets 7,
  OffsetCommit/OffsetFetch 9, OffsetForLeaderEpoch 2, List/DescribeGroups 5, DeleteTopics 4,
  Create/DeleteRecords/DeleteGroups/AlterConfigs 2, IncrementalAlterConfigs 1; rest as 2.0.2.
* kafka-python 3.0: Kafka 4.x message schemas, sends min(its cap, our max): Produce 9 (3 for
  transactions), Fetch 12, JoinGroup 7, SyncGroup 5, OffsetCommit/OffsetFetch 8, InitProducerId
  4, Add*ToTxn/EndTxn/TxnOffsetCommit 3, everything else up to our max (ListOffsets, Metadata,
  FindCoordinator, LeaveGroup, ...). It infers the broker release from the ranges (Produce 11
  reads as 3.8) and allows zstd from 2.1 and record batch v2 from 0.11.
* aiokafka 0.14: fixed version lists, highest one inside our range: ApiVersions v0 first, Produce
  7, Fetch 11, ListOffsets 3, Metadata 5, OffsetCommit 3, OffsetFetch 3, FindCoordinator 1,
  JoinGroup 5, SyncGroup 3, Heartbeat/LeaveGroup 1, DescribeGroups 3, ListGroups 1,
  CreateTopics/DeleteTopics 3, DeleteRecords/DescribeConfigs 2, AlterConfigs/CreatePartitions/
  DeleteGroups 1, InitProducerId/Add*ToTxn/EndTxn/TxnOffsetCommit 0. Always writes batch v2.

No client needs a version kio lacks; all ranges below overlap every client's.

The controller quorum's APIs (KRaft, KIP-595) are served on the controller listener, between
controllers and by brokers observing the quorum; they are declared apart, in `QUORUM_API_TABLE`
(a client-facing broker neither advertises nor decodes them). Their Fetch is key 1 above:
v13+, the metadata topic named by its ID. Versions, capped where a later version needs what the
quorum does not implement:

====  ======================  =========  =============================================
key   API                     versions   why the cap
====  ======================  =========  =============================================
52    Vote                    0-1        v2 adds pre-vote (KIP-996)
53    BeginQuorumEpoch        0-1
54    EndQuorumEpoch          0-1
55    DescribeQuorum          0-2
59    FetchSnapshot           0-1
====  ======================  =========  =============================================

Kafka 3.7 speaks v0 of Vote, BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot, DescribeQuorum
v0-1 and Fetch up to v16; 3.9 adds the v1s (KIP-853: directory ids, endpoints) and Fetch v17.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = [
    "API_TABLE",
    "API_VERSIONS_KEY",
    "CONTROLLED_SHUTDOWN_KEY",
    "CONTROLLER_API_TABLE",
    "QUORUM_API_TABLE",
    "ApiSpec",
    "flexible_from",
    "is_flexible",
    "spec_for",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API as this layer supports it.

    Invariants: `min_version <= max_version <= topic_id_max_version`, every version in
    `min_version..topic_id_max_version` has kio request and response classes, and
    `advertised_min_version <= min_version`.
    """

    key: int
    name: str  # kio's module name, e.g. "list_offsets"
    min_version: int
    max_version: int
    topic_id_max_version: int
    advertised_min_version: int

    def highest(self, topic_ids: bool) -> int:
        """The highest version the broker may accept and advertise."""
        return self.topic_id_max_version if topic_ids else self.max_version

    def accepts(self, version: int, topic_ids: bool = True) -> bool:
        """Whether `version` decodes here (and, with `topic_ids` False, needs no topic IDs)."""
        return self.min_version <= version <= self.highest(topic_ids)

    def is_flexible(self, version: int) -> bool:
        """Whether `version` uses compact encodings, tagged fields and header v2 / v1."""
        return is_flexible(self.key, version)

    def request_type(self, version: int) -> type[RequestPayload]:
        """kio's request class for `version` (which must be accepted)."""
        return _request_type(self.key, version)

    def response_type(self, version: int) -> type[ResponsePayload]:
        """kio's response class for `version` (which must be accepted)."""
        return _response_type(self.key, version)


# key: (kio name, max without topic IDs, max with topic IDs or None for the same)
_RANGES: dict[int, tuple[str, int | None, int | None]] = {
    0: ("produce", 11, None),
    1: ("fetch", 12, 18),
    2: ("list_offsets", 7, None),
    3: ("metadata", None, None),
    8: ("offset_commit", 9, 10),
    9: ("offset_fetch", 9, 10),
    10: ("find_coordinator", 5, None),
    11: ("join_group", None, None),
    12: ("heartbeat", None, None),
    13: ("leave_group", None, None),
    14: ("sync_group", None, None),
    15: ("describe_groups", None, None),
    16: ("list_groups", None, None),
    18: ("api_versions", None, None),
    19: ("create_topics", None, None),
    20: ("delete_topics", None, None),
    21: ("delete_records", None, None),
    22: ("init_producer_id", 5, None),
    23: ("offset_for_leader_epoch", None, None),
    24: ("add_partitions_to_txn", 3, None),
    25: ("add_offsets_to_txn", None, None),
    26: ("end_txn", 4, None),
    27: ("write_txn_markers", 1, None),
    28: ("txn_offset_commit", 4, None),
    32: ("describe_configs", None, None),
    33: ("alter_configs", None, None),
    35: ("describe_log_dirs", None, None),
    37: ("create_partitions", None, None),
    42: ("delete_groups", None, None),
    43: ("elect_leaders", None, None),
    44: ("incremental_alter_configs", None, None),
    45: ("alter_partition_reassignments", None, None),
    46: ("list_partition_reassignments", None, None),
    47: ("offset_delete", None, None),
    55: ("describe_quorum", 2, None),
    60: ("describe_cluster", None, None),
    61: ("describe_producers", None, None),
    65: ("describe_transactions", None, None),
    66: ("list_transactions", None, None),
}

# Kafka lists Produce from v0 in ApiVersions although it refuses v0-2 (KAFKA-18659).
_ADVERTISED_MIN = {0: 0}


def _build_spec(key: int, name: str, cap: int | None, id_cap: int | None) -> ApiSpec:
    if api_key_map.get(key) != name:
        raise RuntimeError(f"kio maps API key {key} to {api_key_map.get(key)!r}, not {name!r}")
    versions = sorted(schema_name_map[name])
    low, kio_high = versions[0], versions[-1]
    high = kio_high if cap is None else cap
    id_high = high if id_cap is None else id_cap
    if not low <= high <= id_high <= kio_high:
        raise RuntimeError(f"{name}: range {low}-{high}/{id_high} outside kio's {low}-{kio_high}")
    return ApiSpec(
        key=key,
        name=name,
        min_version=low,
        max_version=high,
        topic_id_max_version=id_high,
        advertised_min_version=_ADVERTISED_MIN.get(key, low),
    )


API_TABLE: Mapping[int, ApiSpec] = MappingProxyType(
    {key: _build_spec(key, *entry) for key, entry in _RANGES.items()}
)


# key: (kio name, max version)
_QUORUM_RANGES: dict[int, tuple[str, int]] = {
    52: ("vote", 1),
    53: ("begin_quorum_epoch", 1),
    54: ("end_quorum_epoch", 1),
    55: ("describe_quorum", 2),
    59: ("fetch_snapshot", 1),
}

QUORUM_API_TABLE: Mapping[int, ApiSpec] = MappingProxyType(
    {key: _build_spec(key, name, cap, None) for key, (name, cap) in _QUORUM_RANGES.items()}
)

# What only controllers serve (on their controller listener), besides the quorum's APIs:
# brokers' registrations, heartbeats, ISR changes and producer-id blocks.
# key: (kio name, max version)
_CONTROLLER_RANGES: dict[int, tuple[str, int | None]] = {
    56: ("alter_partition", 3),
    62: ("broker_registration", 3),
    63: ("broker_heartbeat", 1),
    64: ("unregister_broker", None),
    67: ("allocate_producer_ids", None),
}

CONTROLLER_API_TABLE: Mapping[int, ApiSpec] = MappingProxyType(
    {key: _build_spec(key, name, cap, None) for key, (name, cap) in _CONTROLLER_RANGES.items()}
)


def spec_for(api_key: int) -> ApiSpec | None:
    """The spec for `api_key` (a broker's, the quorum's or a controller's API), or None if this
    layer does not speak it."""
    return API_TABLE.get(api_key) or QUORUM_API_TABLE.get(api_key) or \
        CONTROLLER_API_TABLE.get(api_key)


FLEXIBLE_CACHE_SIZE = 4096  # kio knows about 300 (key, version) pairs


@functools.lru_cache(maxsize=FLEXIBLE_CACHE_SIZE)
def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this version of any API kio knows is flexible (header v2 / v1, compact fields).

    Reads only this version's kio class, the one a request of it decodes with anyway: loading
    every version to find the first flexible one cost a fresh broker 6-50 ms at the first
    request of each API (a produce client's first batch waited 60 ms behind it). Every
    request's header asks, whatever its key and version, so the cache is bounded: a client
    sending made-up pairs must not grow it without end.
    """
    name = api_key_map.get(api_key)
    if name is None:
        return False
    if api_version in schema_name_map[name]:
        return bool(load_request_schema(api_key, api_version).__flexible__)
    first = flexible_from(api_key)
    return first is not None and api_version >= first


@functools.cache
def flexible_from(api_key: int) -> int | None:
    """The first flexible version of any API kio knows, or None (never / unknown key).

    Used for header versions, so it also covers keys we do not serve: Kafka's flexible ranges
    are open-ended ("N+"), hence a version above kio's highest is flexible if any version is.
    """
    name = api_key_map.get(api_key)
    if name is None:
        return None
    for version in sorted(schema_name_map[name]):
        if load_request_schema(api_key, version).__flexible__:
            return version
    return None


@functools.cache
def _request_type(api_key: int, version: int) -> type[RequestPayload]:
    return load_request_schema(api_key, version)


@functools.cache
def _response_type(api_key: int, version: int) -> type[ResponsePayload]:
    return load_response_schema(api_key, version)
