"""The group APIs on the wire, against the real broker process: every version's shape and
Kafka's error codes, sent byte for byte with the raw client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spark_log.broker.group.offsets_topic import partition_for
from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

from .test_group_helpers import subscription

GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000"}
DEADLINE_S = 15.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("groups")
    proc = BrokerProcess(tmp / "data", tmp / "broker.log", GROUP_CONFIG).start()
    coordinators_ready(proc)
    yield proc
    assert proc.stop() == 0, proc.log()


def coordinators_ready(broker: BrokerProcess, partitions: int = 50) -> None:
    """What a client's FindCoordinator does for its group, for a group of every
    __consumer_offsets partition (offsets.topic.num.partitions): the topic is created and each
    partition loaded, so the tests' requests, which name fresh groups, find them ready."""
    keys = {partition_for(f"k{i}", partitions): f"k{i}" for i in range(20 * partitions)}
    assert len(keys) == partitions
    with RawClient(broker.bootstrap) as raw:
        for key in keys.values():
            found = raw.request(ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": 0})
            assert found.error_code == ErrorCode.none, found


@pytest.fixture
def client(group_broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(group_broker.bootstrap) as c:
        yield c


def create_topic(client: RawClient, name: str, partitions: int = 2) -> None:
    response = client.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout": 10_000, "validate_only": False})
    assert response.topics[0].error_code == ErrorCode.none


def join(client: RawClient, group: str, member: str = "", instance: str | None = None,
         topics: tuple[str, ...] = ("t",), version: int = 5, session: int = 10_000,
         protocol_type: str = "consumer", protocols: tuple[str, ...] = ("range",)) -> Any:
    return client.request(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout": session, "rebalance_timeout": 30_000,
        "member_id": member, "group_instance_id": instance, "protocol_type": protocol_type,
        "protocols": [{"name": p, "metadata": subscription(*topics)} for p in protocols],
        "reason": None})


def join_member(client: RawClient, group: str, **kw: Any) -> Any:
    """A new dynamic member: MEMBER_ID_REQUIRED, then the join with that id."""
    first = join(client, group, **kw)
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id
    joined = join(client, group, member=first.member_id, **kw)
    assert joined.error_code == ErrorCode.none, joined
    return joined


def sync(client: RawClient, group: str, member: str, generation: int,
         assignments: dict[str, bytes] | None = None, instance: str | None = None,
         version: int = 5) -> Any:
    return client.request(ApiKey.SYNC_GROUP, version, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a}
                        for m, a in (assignments or {}).items()]})


def stable_member(client: RawClient, group: str, **kw: Any) -> tuple[str, int]:
    joined = join_member(client, group, **kw)
    synced = sync(client, group, joined.member_id, joined.generation_id,
                  {joined.member_id: b"assigned"})
    assert synced.error_code == ErrorCode.none and synced.assignment == b"assigned"
    return joined.member_id, joined.generation_id


def heartbeat(client: RawClient, group: str, member: str, generation: int,
              instance: str | None = None) -> ErrorCode:
    return client.request(ApiKey.HEARTBEAT, 4, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": instance}).error_code


def commit(client: RawClient, group: str, topic: str, offset: int, member: str = "",
           generation: int = -1, version: int = 8, metadata: str | None = "",
           partition: int = 0, **extra: Any) -> ErrorCode:
    response = client.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, **extra,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "committed_offset": offset,
             "committed_leader_epoch": -1, "committed_metadata": metadata}]}]})
    return response.topics[0].partitions[0].error_code


def fetch_v7(client: RawClient, group: str, topic: str, partitions: tuple[int, ...] = (0,),
             require_stable: bool = False) -> Any:
    return client.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": require_stable,
        "topics": [{"name": topic, "partition_indexes": list(partitions)}]})


# ---- FindCoordinator --------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key(client: RawClient, group_broker: BrokerProcess,
                                     version: int) -> None:
    response = client.request(ApiKey.FIND_COORDINATOR, version, {"key": "g", "key_type": 0})
    assert response.error_code == ErrorCode.none
    assert (response.host, response.port) == (group_broker.host, group_broker.port)
    assert response.node_id == 0


def test_find_coordinator_batched_keys_and_types(client: RawClient,
                                                 group_broker: BrokerProcess) -> None:
    groups = client.request(ApiKey.FIND_COORDINATOR, 4,
                            {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.error_code, c.port) for c in groups.coordinators] == \
        [("a", ErrorCode.none, group_broker.port), ("b", ErrorCode.none, group_broker.port)]
    txn = client.request(ApiKey.FIND_COORDINATOR, 5, {"key_type": 1, "coordinator_keys": ["x"]})
    assert txn.coordinators[0].error_code == ErrorCode.none
    assert txn.coordinators[0].node_id == 0
    bad = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 5})
    assert bad.error_code == ErrorCode.invalid_request and bad.node_id == -1


@pytest.mark.parametrize("created_by", ["FindCoordinator", "Metadata"])
def test_consumer_offsets_is_an_internal_compacted_topic(broker_factory: Any,
                                                         created_by: str) -> None:
    broker = broker_factory(GROUP_CONFIG)
    with RawClient(broker.bootstrap) as client:
        if created_by == "FindCoordinator":
            client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        check_offsets_topic(client, auto_create=created_by == "Metadata")


def check_offsets_topic(client: RawClient, auto_create: bool) -> None:
    metadata = client.request(ApiKey.METADATA, 12, {
        "topics": [{"name": "__consumer_offsets", "topic_id": None}],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": False})
    topic = metadata.topics[0]
    assert topic.error_code == ErrorCode.none and topic.is_internal
    assert len(topic.partitions) == 50
    configs = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 2, "resource_name": "__consumer_offsets",
                       "configuration_keys": ["cleanup.policy", "segment.bytes"]}],
        "include_synonyms": False, "include_documentation": False})
    values = {c.name: c.value for c in configs.results[0].configs}
    assert values == {"cleanup.policy": "compact", "segment.bytes": "104857600"}


# ---- JoinGroup / SyncGroup / Heartbeat --------------------------------------------------------
def test_join_errors(client: RawClient) -> None:
    assert join(client, "g", session=999).error_code == ErrorCode.invalid_session_timeout
    assert join(client, "").error_code == ErrorCode.invalid_group_id
    assert join(client, unique("g"), member="made-up").error_code == \
        ErrorCode.unknown_member_id
    group = unique("g")
    stable_member(client, group)
    other = join(client, group, protocols=("sticky",))
    assert other.error_code == ErrorCode.inconsistent_group_protocol
    typed = join(client, group, protocol_type="connect")
    assert typed.error_code == ErrorCode.inconsistent_group_protocol


@pytest.mark.parametrize("version", [0, 3, 6, 7, 9])
def test_join_and_sync_every_version(client: RawClient, version: int) -> None:
    group = unique("g")
    if version >= 4:
        joined = join_member(client, group, version=version)
    else:
        joined = join(client, group, version=version)
    assert joined.error_code == ErrorCode.none
    assert joined.generation_id == 1 and joined.leader == joined.member_id
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [joined.member_id]
    synced = sync(client, group, joined.member_id, 1, {joined.member_id: b"x"},
                  version=min(version, 5))
    assert synced.error_code == ErrorCode.none and synced.assignment == b"x"


def test_sync_and_heartbeat_errors(client: RawClient) -> None:
    group = unique("g")
    member, gen = stable_member(client, group)
    assert heartbeat(client, group, member, gen) == ErrorCode.none
    assert heartbeat(client, group, member, gen + 1) == ErrorCode.illegal_generation
    assert heartbeat(client, group, "stranger", gen) == ErrorCode.unknown_member_id
    assert heartbeat(client, unique("nogroup"), member, gen) == ErrorCode.unknown_member_id
    assert sync(client, group, member, gen + 1).error_code == ErrorCode.illegal_generation
    assert sync(client, group, "stranger", gen).error_code == ErrorCode.unknown_member_id
    assert sync(client, group, member, gen).assignment == b"assigned"  # Stable: same again


def test_static_member_fences_its_previous_incarnation(client: RawClient) -> None:
    group = unique("g")
    first = join(client, group, instance="instance-1")
    assert first.error_code == ErrorCode.none  # static members need no member id round trip
    sync(client, group, first.member_id, first.generation_id, {first.member_id: b"a"},
         instance="instance-1")
    second = join(client, group, instance="instance-1")
    assert second.error_code == ErrorCode.none
    assert second.member_id != first.member_id
    assert second.generation_id == first.generation_id  # no rebalance
    assert heartbeat(client, group, first.member_id, first.generation_id, "instance-1") == \
        ErrorCode.fenced_instance_id
    assert sync(client, group, second.member_id, second.generation_id,
                instance="instance-1").assignment == b"a"


# ---- LeaveGroup -------------------------------------------------------------------------------
def test_leave_group_v0_reports_the_member_error_at_the_top(client: RawClient) -> None:
    group = unique("g")
    member, _ = stable_member(client, group)
    unknown = client.request(ApiKey.LEAVE_GROUP, 1, {"group_id": group, "member_id": "x"})
    assert unknown.error_code == ErrorCode.unknown_member_id
    left = client.request(ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": member})
    assert left.error_code == ErrorCode.none


def test_leave_group_v3_batched_members(client: RawClient) -> None:
    group = unique("g")
    static = join(client, group, instance="s-1")
    sync(client, group, static.member_id, static.generation_id, {}, instance="s-1")
    pending = join(client, group)  # a dynamic member between its two JoinGroups
    assert pending.error_code == ErrorCode.member_id_required
    response = client.request(ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [
        {"member_id": pending.member_id, "group_instance_id": None, "reason": "bye"},
        {"member_id": "", "group_instance_id": "s-1", "reason": None},
        {"member_id": "ghost", "group_instance_id": None, "reason": None}]})
    assert response.error_code == ErrorCode.none
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
        (pending.member_id, None, ErrorCode.none), ("", "s-1", ErrorCode.none),
        ("ghost", None, ErrorCode.unknown_member_id)]
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": False})
    assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", ())


# ---- OffsetCommit / OffsetFetch ---------------------------------------------------------------
def test_offset_commit_error_codes(client: RawClient) -> None:
    topic = unique("t")
    create_topic(client, topic)
    group = unique("g")
    member, gen = stable_member(client, group, topics=(topic,))
    assert commit(client, group, topic, 5, member, gen) == ErrorCode.none
    assert commit(client, group, topic, 5, member, gen - 1) == ErrorCode.illegal_generation
    assert commit(client, group, topic, 5, "stranger", gen) == ErrorCode.unknown_member_id
    assert commit(client, group, topic, 5) == ErrorCode.unknown_member_id  # not a simple group
    assert commit(client, group, "no-such-topic", 5, member, gen) == \
        ErrorCode.unknown_topic_or_partition
    assert commit(client, group, topic, 5, member, gen, partition=7) == \
        ErrorCode.unknown_topic_or_partition
    assert commit(client, unique("none"), topic, 5, "m", 3) == ErrorCode.illegal_generation
    assert commit(client, unique("none"), topic, 5, "m", 3, version=9) == \
        ErrorCode.group_id_not_found
    assert commit(client, group, topic, 5, member, gen, metadata="x" * 4097) == \
        ErrorCode.offset_metadata_too_large


def test_simple_consumer_commits_round_trip_metadata(client: RawClient) -> None:
    topic = unique("t")
    create_topic(client, topic)
    group = unique("simple")
    assert commit(client, group, topic, 42, metadata="where I stopped", version=2) == \
        ErrorCode.none
    assert commit(client, group, topic, 7, metadata=None, partition=1) == ErrorCode.none
    fetched = fetch_v7(client, group, topic, (0, 1))
    assert fetched.error_code == ErrorCode.none
    assert [(p.partition_index, p.committed_offset, p.metadata)
            for p in fetched.topics[0].partitions] == [(0, 42, "where I stopped"), (1, 7, "")]
    v1 = client.request(ApiKey.OFFSET_FETCH, 1, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]})
    assert v1.topics[0].partitions[0].committed_offset == 42
    everything = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                                        "require_stable": True})
    assert sorted((t.name, p.partition_index, p.committed_offset)
                  for t in everything.topics for p in t.partitions) == \
        [(topic, 0, 42), (topic, 1, 7)]


def test_offset_fetch_v8_batches_groups(client: RawClient) -> None:
    topic = unique("t")
    create_topic(client, topic)
    a, b = unique("a"), unique("b")
    commit(client, a, topic, 1)
    commit(client, b, topic, 2)
    response = client.request(ApiKey.OFFSET_FETCH, 8, {"require_stable": False, "groups": [
        {"group_id": a, "topics": [{"name": topic, "partition_indexes": [0]}]},
        {"group_id": b, "topics": None},
        {"group_id": unique("nobody"), "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    offsets = [[(p.committed_offset, p.error_code) for t in g.topics for p in t.partitions]
               for g in response.groups]
    assert offsets == [[(1, ErrorCode.none)], [(2, ErrorCode.none)], [(-1, ErrorCode.none)]]


def test_offset_commit_retention_time_expires_the_offset(broker_factory: Any) -> None:
    broker = broker_factory({**GROUP_CONFIG, "offsets.retention.check.interval.ms": "100"})
    with RawClient(broker.bootstrap) as client:
        topic = unique("t")
        create_topic(client, topic)
        group = unique("short")
        # As a client does: find the coordinator first (on a new broker this creates
        # __consumer_offsets and answers once the coordinator serves it).
        found = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        assert found.error_code == ErrorCode.none
        assert commit(client, group, topic, 3, version=2, retention_time=500) == ErrorCode.none
        assert fetch_v7(client, group, topic).topics[0].partitions[0].committed_offset == 3
        deadline = time.monotonic() + DEADLINE_S
        while fetch_v7(client, group, topic).topics[0].partitions[0].committed_offset != -1:
            assert time.monotonic() < deadline, "the offset did not expire"
            time.sleep(0.05)
        listed = client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert group not in {g.group_id for g in listed.groups}  # no offsets left: deleted


# ---- ListGroups / DescribeGroups / DeleteGroups / OffsetDelete ---------------------------------
def test_list_and_describe_groups(client: RawClient) -> None:
    group = unique("listed")
    member, _ = stable_member(client, group)
    listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": ["stable"],
                                                    "types_filter": []})
    assert (group, "consumer", "Stable", "classic") in {
        (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
    empty_only = client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Empty"]})
    assert group not in {g.group_id for g in empty_only.groups}
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group, unique("missing")], "include_authorized_operations": True})
    found, missing = described.groups
    assert (found.group_state, found.protocol_type, found.protocol_data) == \
        ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_assignment)
            for m in found.members] == [(member, "raw-test", "/127.0.0.1", b"assigned")]
    assert found.authorized_operations == 3400
    assert (missing.error_code, missing.group_state) == (ErrorCode.none, "Dead")
    v6 = client.request(ApiKey.DESCRIBE_GROUPS, 6, {
        "groups": [missing.group_id], "include_authorized_operations": False})
    assert v6.groups[0].error_code == ErrorCode.group_id_not_found
    assert v6.groups[0].error_message == f"Group {missing.group_id} not found."


def test_delete_groups_and_offsets(client: RawClient) -> None:
    topic = unique("t")
    create_topic(client, topic)
    busy, idle = unique("busy"), unique("idle")
    member, gen = stable_member(client, busy, topics=(topic,))
    commit(client, busy, topic, 1, member, gen)
    commit(client, busy, "__consumer_offsets", 1, member, gen)
    commit(client, idle, topic, 1)
    deleted = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [busy, idle, "nope"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (busy, ErrorCode.non_empty_group), (idle, ErrorCode.none),
        ("nope", ErrorCode.group_id_not_found)]
    assert fetch_v7(client, idle, topic).topics[0].partitions[0].committed_offset == -1
    response = client.request(ApiKey.OFFSET_DELETE, 0, {"group_id": busy, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]},
        {"name": "__consumer_offsets", "partitions": [{"partition_index": 0}]},
        {"name": "no-such-topic", "partitions": [{"partition_index": 0}]}]})
    assert response.error_code == ErrorCode.none
    assert [(t.name, t.partitions[0].error_code) for t in response.topics] == [
        (topic, ErrorCode.group_subscribed_to_topic),
        ("__consumer_offsets", ErrorCode.none),
        ("no-such-topic", ErrorCode.unknown_topic_or_partition)]
    gone = client.request(ApiKey.OFFSET_DELETE, 0, {"group_id": unique("x"), "topics": []})
    assert gone.error_code == ErrorCode.group_id_not_found


def test_offset_commit_and_fetch_v10_name_topics_by_id(client: RawClient) -> None:
    topic = unique("t")
    create_topic(client, topic)
    metadata = client.request(ApiKey.METADATA, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    topic_id = metadata.topics[0].topic_id
    group, unknown_id = unique("ids"), uuid.uuid4()
    committed = client.request(ApiKey.OFFSET_COMMIT, 10, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 1, "committed_offset": 8,
                                                   "committed_leader_epoch": -1,
                                                   "committed_metadata": "by id"}]},
            {"topic_id": unknown_id, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_leader_epoch": -1,
                                                     "committed_metadata": None}]}]})
    assert [(t.topic_id, t.partitions[0].error_code) for t in committed.topics] == [
        (topic_id, ErrorCode.none), (unknown_id, ErrorCode.unknown_topic_id)]
    fetched = client.request(ApiKey.OFFSET_FETCH, 10, {"require_stable": True, "groups": [
        {"group_id": group, "member_id": None, "member_epoch": -1,
         "topics": [{"topic_id": topic_id, "partition_indexes": [1]}]}]})
    topics = fetched.groups[0].topics
    assert [(t.topic_id, p.committed_offset, p.metadata) for t in topics for p in t.partitions] \
        == [(topic_id, 8, "by id")]
