"""The group coordinator's state machine, in process on a ManualClock: rebalances, timeouts,
static members, offset rules, expiry, transactional offsets and reloading from the log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from spark_log.broker.errors import KafkaError
from spark_log.broker.group.group_coordinator_offsets import PartitionCommit
from spark_log.broker.group.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
)
from spark_log.clock import ManualClock
from spark_log.protocol import ErrorCode

from .test_group_helpers import GroupHarness, running_broker

Scenario = Callable[[GroupHarness], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, **config: str) -> None:
    async def main() -> None:
        async with running_broker(tmp_path / "data", ManualClock(), **config) as h:
            await scenario(h)

    asyncio.run(main())


async def stable_group(h: GroupHarness, group: str, count: int, **kw: object
                       ) -> tuple[list[str], int]:
    """`count` members joined and synced (the first is the leader); (member ids, generation)."""
    tasks = [await h.join_new(group, client=f"c{i}", **kw) for i in range(count)]
    await h.settle()
    joined = [await t for t in tasks]
    ids = [j["member_id"] for j in joined]
    generation = joined[0]["generation_id"]
    leader = joined[0]["leader"]
    syncs = [h.sync(group, m, generation, {x: x.encode() for x in ids} if m == leader else None)
             for m in ids]
    for sync in syncs:
        assert (await sync)["error_code"] == ErrorCode.none
    return ids, generation


# ---- joining ----------------------------------------------------------------------------------
def test_first_join_requires_a_member_id_from_v4(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        first = await h.join("g")
        assert first["error_code"] == ErrorCode.member_id_required
        assert first["member_id"].startswith("client-")
        old = h.join("g-old", version=3)
        await h.settle()
        joined = await old
        assert joined["error_code"] == ErrorCode.none
        assert joined["generation_id"] == 1

    run(tmp_path, scenario)


def test_initial_rebalance_delay_collects_members_of_a_new_group(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        a = await h.join_new("g")
        h.tick(2000)
        b = await h.join_new("g")
        h.tick(1000)  # the first delay is over, but a member came: wait another delay
        assert not a.done() and not b.done()
        h.tick(3000)
        ja, jb = await a, await b
        assert ja["generation_id"] == jb["generation_id"] == 1
        assert ja["leader"] == ja["member_id"] == jb["leader"]
        assert {m["member_id"] for m in ja["members"]} == {ja["member_id"], jb["member_id"]}
        assert jb["members"] == []
        assert ja["protocol_name"] == "range"

    run(tmp_path, scenario, group_initial_rebalance_delay_ms="3000")


def test_invalid_session_timeout_and_group_id(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        assert (await h.join("g", session=5999))["error_code"] == \
            ErrorCode.invalid_session_timeout
        assert (await h.join("g", session=1_800_001))["error_code"] == \
            ErrorCode.invalid_session_timeout
        assert (await h.join(""))["error_code"] == ErrorCode.invalid_group_id
        assert (await h.join("g", member="nobody"))["error_code"] == \
            ErrorCode.unknown_member_id

    run(tmp_path, scenario)


def test_protocol_is_chosen_by_votes_and_must_be_shared(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        a = await h.join_new("g", protocols=("roundrobin", "range"))
        b = await h.join_new("g", protocols=("range", "roundrobin"))
        c = await h.join_new("g", protocols=("range",))
        await h.settle()
        assert {(await t)["protocol_name"] for t in (a, b, c)} == {"range"}
        bad = await h.join("g", protocols=("sticky",))
        assert bad["error_code"] == ErrorCode.inconsistent_group_protocol

    run(tmp_path, scenario)


# ---- syncing and heartbeats -------------------------------------------------------------------
def test_sync_hands_out_and_persists_the_leaders_assignment(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        a = await h.join_new("g")
        b = await h.join_new("g")
        await h.settle()
        ja, jb = await a, await b
        gen = ja["generation_id"]
        follower = h.sync("g", jb["member_id"], gen)
        await asyncio.sleep(0)
        assert not follower.done()  # parked until the leader's assignment arrives
        leader = await h.sync("g", ja["member_id"], gen,
                              {ja["member_id"]: b"A", jb["member_id"]: b"B"})
        assert leader["assignment"] == b"A"
        assert (await follower)["assignment"] == b"B"
        assert h.coord.describe_group("g").state == "Stable"
        _, value = [r for r in h.records("g") if isinstance(r[0], GroupMetadataKey)][-1]
        assert isinstance(value, GroupMetadataValue)
        assert value.generation == gen and value.protocol == "range"
        assert {m.member_id: m.assignment for m in value.members} == \
            {ja["member_id"]: b"A", jb["member_id"]: b"B"}

    run(tmp_path, scenario)


def test_heartbeat_error_codes(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        (m1, m2), gen = await stable_group(h, "g", 2)
        assert h.coord.heartbeat("g", m1, None, gen) == ErrorCode.none
        assert h.coord.heartbeat("g", "stranger", None, gen) == ErrorCode.unknown_member_id
        assert h.coord.heartbeat("g", m1, None, gen + 1) == ErrorCode.illegal_generation
        assert h.coord.heartbeat("nope", m1, None, gen) == ErrorCode.unknown_member_id
        assert h.coord.heartbeat("", m1, None, gen) == ErrorCode.invalid_group_id
        newcomer = await h.join_new("g")
        assert h.coord.heartbeat("g", m1, None, gen) == ErrorCode.rebalance_in_progress
        rejoin = [h.join("g", member=m) for m in (m1, m2)]
        for t in [newcomer, *rejoin]:
            assert (await t)["generation_id"] == gen + 1

    run(tmp_path, scenario)


def test_session_timeout_removes_a_silent_member(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        (m1, m2), gen = await stable_group(h, "g", 2)
        assert m1 != m2
        for _ in range(2):  # m1 keeps heartbeating, m2 is silent
            h.tick(4000)
            assert h.coord.heartbeat("g", m1, None, gen) == ErrorCode.none
        assert h.coord.describe_group("g").state == "Stable"
        h.tick(2000)  # m2's 10 s session is over
        assert h.coord.describe_group("g").state == "PreparingRebalance"
        assert h.coord.heartbeat("g", m1, None, gen) == ErrorCode.rebalance_in_progress
        rejoined = await h.join("g", member=m1)  # the only member left: completes at once
        assert rejoined["generation_id"] == gen + 1
        assert [m["member_id"] for m in rejoined["members"]] == [m1]

    run(tmp_path, scenario)


def test_members_that_do_not_rejoin_in_the_rebalance_timeout_are_dropped(tmp_path: Path
                                                                        ) -> None:
    async def scenario(h: GroupHarness) -> None:
        (m1, m2), gen = await stable_group(h, "g", 2, rebalance=20_000)
        again = h.join("g", member=m1)  # the leader rejoins: a rebalance starts
        await asyncio.sleep(0)
        h.tick(9000)
        assert h.coord.heartbeat("g", m2, None, gen) == ErrorCode.rebalance_in_progress
        h.tick(11_000)  # m2 heartbeats but never rejoins
        joined = await again
        assert joined["generation_id"] == gen + 1
        assert [m["member_id"] for m in joined["members"]] == [m1]
        assert h.coord.heartbeat("g", m2, None, gen) == ErrorCode.unknown_member_id

    run(tmp_path, scenario)


def test_leave_group_batched(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        (m1, m2), _ = await stable_group(h, "g", 2)
        error, errors = h.coord.leave_group("g", [(m2, None), ("stranger", None)])
        assert error == ErrorCode.none
        assert errors == [ErrorCode.none, ErrorCode.unknown_member_id]
        assert h.coord.leave_group("unknown-group", [(m1, None)]) == \
            (ErrorCode.none, [ErrorCode.unknown_member_id])
        assert [m.member_id for m in h.coord.describe_group("g").members] == [m1]

    run(tmp_path, scenario)


# ---- static membership ------------------------------------------------------------------------
def test_static_member_restart_keeps_assignment_without_rebalance(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        a = h.join("g", instance="i-a")
        b = h.join("g", instance="i-b")
        await h.settle()
        ja, jb = await a, await b
        gen = ja["generation_id"]
        leader = ja["leader"]
        assignment = {ja["member_id"]: b"A", jb["member_id"]: b"B"}
        syncs = [h.sync("g", j["member_id"], gen,
                        assignment if j["member_id"] == leader else None, j_inst)
                 for j, j_inst in ((ja, "i-a"), (jb, "i-b"))]
        await asyncio.gather(*syncs)
        old_id = jb["member_id"]
        h.tick(5000)
        back = await h.join("g", instance="i-b")  # "restarted" within the session timeout
        assert back["error_code"] == ErrorCode.none
        assert back["generation_id"] == gen
        assert back["member_id"] != old_id and back["member_id"].startswith("i-b-")
        synced = await h.sync("g", back["member_id"], gen, instance="i-b")
        assert synced["assignment"] == b"B"
        assert h.coord.describe_group("g").state == "Stable"
        assert h.coord.heartbeat("g", old_id, "i-b", gen) == ErrorCode.fenced_instance_id
        assert h.coord.heartbeat("g", back["member_id"], "i-b", gen) == ErrorCode.none
        assert h.coord.heartbeat("g", ja["member_id"], "i-a", gen) == ErrorCode.none

    run(tmp_path, scenario)


def test_static_leader_rejoining_with_skip_assignment(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        joined = h.join("g", instance="i-a", version=9)
        await h.settle()
        ja = await joined
        gen = ja["generation_id"]
        await h.sync("g", ja["member_id"], gen, {ja["member_id"]: b"A"}, "i-a")
        back = await h.join("g", instance="i-a", version=9)
        assert back["skip_assignment"] is True
        assert back["leader"] == back["member_id"] and back["generation_id"] == gen
        assert [m["member_id"] for m in back["members"]] == [back["member_id"]]

    run(tmp_path, scenario)


# ---- offsets ----------------------------------------------------------------------------------
def commit(h: GroupHarness, group: str, member: str = "", generation: int = -1,
           offset: int = 5, topic: str = "t", version: int = 8,
           metadata: str = "") -> list[ErrorCode]:
    return h.coord.commit_offsets(group, member, None, generation,
                                  [PartitionCommit(topic, 0, offset, -1, metadata)],
                                  api_version=version)


def commit_error(h: GroupHarness, *args: object, **kw: object) -> ErrorCode:
    try:
        return commit(h, *args, **kw)[0]  # type: ignore[arg-type]
    except KafkaError as e:
        return e.code


def test_offset_commit_rules(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        assert commit(h, "simple", metadata="m") == [ErrorCode.none]  # simple consumer
        assert commit_error(h, "none", "m", 1) == ErrorCode.illegal_generation
        assert commit_error(h, "none", "m", 1, version=9) == ErrorCode.group_id_not_found
        assert commit_error(h, "simple", metadata="x" * 4097) == \
            ErrorCode.offset_metadata_too_large
        a = await h.join_new("g")
        b = await h.join_new("g")
        await h.settle()
        ja, jb = await a, await b
        gen = ja["generation_id"]
        assert commit_error(h, "g", ja["member_id"], gen) == ErrorCode.rebalance_in_progress
        await asyncio.gather(h.sync("g", ja["member_id"], gen, {}),
                             h.sync("g", jb["member_id"], gen))
        assert commit_error(h, "g", ja["member_id"], gen) == ErrorCode.none
        assert commit_error(h, "g", ja["member_id"], gen - 1) == ErrorCode.illegal_generation
        assert commit_error(h, "g", "stranger", gen) == ErrorCode.unknown_member_id
        assert commit_error(h, "g") == ErrorCode.unknown_member_id  # gen -1, group not empty
        fetched = h.coord.fetch_offsets("simple", [("t", 0), ("t", 1)])
        assert [(f.offset, f.metadata) for f in fetched] == [(5, "m"), (-1, "")]

    run(tmp_path, scenario)


def test_offsets_of_an_empty_group_expire_after_the_retention(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        ids, gen = await stable_group(h, "g", 1)
        assert commit(h, "g", ids[0], gen) == [ErrorCode.none]
        assert commit(h, "simple") == [ErrorCode.none]
        h.tick(30_000)
        h.coord.leave_group("g", [(ids[0], None)])  # Empty from now: its offsets age from here
        assert h.coord.describe_group("g").state == "Empty"
        h.tick(30_000)
        h.coord.expire_offsets()
        assert h.coord.describe_group("simple") is None  # 60 s after its commit: gone
        assert h.coord.fetch_offsets("g", [("t", 0)])[0].offset == 5
        h.tick(29_999)
        h.coord.expire_offsets()
        assert h.coord.fetch_offsets("g", [("t", 0)])[0].offset == 5
        h.tick(1)
        h.coord.expire_offsets()
        assert h.coord.fetch_offsets("g", [("t", 0)])[0].offset == -1
        assert h.coord.describe_group("g") is None
        assert h.records("g")[-2:] == [(OffsetCommitKey("g", "t", 0), None),
                                       (GroupMetadataKey("g"), None)]

    run(tmp_path, scenario, offsets_retention_minutes="1")


def test_a_stable_consumer_group_keeps_offsets_of_subscribed_topics(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        ids, gen = await stable_group(h, "g", 1, topics=("t",), session=300_000)
        commit(h, "g", ids[0], gen, topic="t")
        commit(h, "g", ids[0], gen, topic="old")
        h.tick(61_000)
        assert h.coord.heartbeat("g", ids[0], None, gen) == ErrorCode.none
        h.coord.expire_offsets()
        fetched = {f.topic: f.offset for f in h.coord.fetch_offsets("g", None)}
        assert fetched == {"t": 5}
        assert h.coord.delete_offsets("g", [("t", 0), ("old", 0)]) == \
            [ErrorCode.group_subscribed_to_topic, ErrorCode.none]

    run(tmp_path, scenario, offsets_retention_minutes="1")


def test_transactional_offsets_wait_for_the_marker(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        txn = [PartitionCommit("t", 0, 10, -1, "txn")]
        assert h.coord.commit_transactional_offsets("g", 1000, 0, txn) == [ErrorCode.none]
        assert h.coord.fetch_offsets("g", [("t", 0)])[0].offset == -1
        stable = h.coord.fetch_offsets("g", [("t", 0)], require_stable=True)[0]
        assert stable.error == ErrorCode.unstable_offset_commit
        assert h.coord.has_pending_transaction(1000)
        h.coord.complete_transaction(1000, 0, commit=True)
        assert h.coord.fetch_offsets("g", [("t", 0)], require_stable=True)[0].offset == 10
        assert not h.coord.has_pending_transaction(1000)
        h.coord.commit_transactional_offsets("g", 1001, 0, [PartitionCommit("t", 0, 20)])
        h.coord.complete_transaction(1001, 0, commit=False)
        assert h.coord.fetch_offsets("g", [("t", 0)])[0].offset == 10
        assert ("control", 1000) in h.records("g") and ("control", 1001) in h.records("g")

    run(tmp_path, scenario)


def test_delete_groups(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        await stable_group(h, "busy", 1)
        commit(h, "idle")
        assert h.coord.delete_groups(["busy", "idle", "missing"]) == [
            ErrorCode.non_empty_group, ErrorCode.none, ErrorCode.group_id_not_found]
        assert h.coord.fetch_offsets("idle", [("t", 0)])[0].offset == -1
        assert h.records("idle")[-2:] == [(OffsetCommitKey("idle", "t", 0), None),
                                          (GroupMetadataKey("idle"), None)]

    run(tmp_path, scenario)


def test_offsets_of_deleted_topics_are_tombstoned(tmp_path: Path) -> None:
    async def scenario(h: GroupHarness) -> None:
        commit(h, "g", topic="gone")
        commit(h, "g", topic="kept")
        h.coord.commit_transactional_offsets("other", 5, 0, [PartitionCommit("gone", 0, 1)])
        h.coord.on_topics_deleted(["gone"])
        assert {f.topic for f in h.coord.fetch_offsets("g", None)} == {"kept"}
        assert (OffsetCommitKey("g", "gone", 0), None) in h.records("g")
        assert (OffsetCommitKey("other", "gone", 0), None) in h.records("other")
        h.coord.complete_transaction(5, 0, commit=True)
        assert h.coord.fetch_offsets("other", None) == []

    run(tmp_path, scenario)


# ---- reloading --------------------------------------------------------------------------------
def test_state_is_rebuilt_from_the_log_after_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    data = tmp_path / "data"

    async def first_life() -> tuple[list[str], int]:
        async with running_broker(data, clock) as h:
            ids, gen = await stable_group(h, "g", 2)
            commit(h, "g", ids[0], gen, metadata="kept")
            h.coord.commit_transactional_offsets("g", 7, 0, [PartitionCommit("t", 1, 99)])
            return ids, gen

    async def second_life(ids: list[str], gen: int) -> None:
        async with running_broker(data, clock, loaded=False) as h:
            with pytest.raises(KafkaError) as loading:
                h.coord.fetch_offsets("g", [("t", 0)])
            assert loading.value.code == ErrorCode.coordinator_load_in_progress
            await h.until_loaded()
            group = h.coord.describe_group("g")
            assert group is not None and group.state == "Stable" and group.generation == gen
            assert sorted(m.member_id for m in group.members) == sorted(ids)
            assert {m.assignment for m in group.members} == {i.encode() for i in ids}
            assert h.coord.fetch_offsets("g", [("t", 0)])[0].metadata == "kept"
            stable = h.coord.fetch_offsets("g", [("t", 1)], require_stable=True)[0]
            assert stable.error == ErrorCode.unstable_offset_commit  # still pending
            h.tick(5000)  # the loaded members' sessions run from the load on
            assert h.coord.heartbeat("g", ids[1], None, gen) == ErrorCode.none
            h.tick(5001)
            group = h.coord.describe_group("g")
            assert group.state == "PreparingRebalance"
            assert [m.member_id for m in group.members] == [ids[1]]

    ids, gen = asyncio.run(first_life())
    asyncio.run(second_life(ids, gen))


# ---- leadership of the group's partition --------------------------------------------------
def test_a_partition_led_elsewhere_is_unloaded_and_reloaded_when_led_again(
        tmp_path: Path) -> None:
    """Losing the leadership of a group's __consumer_offsets partition unloads its groups
    (requests get NOT_COORDINATOR; other partitions' groups stay); regaining it loads them
    back from the log."""

    async def scenario(h: GroupHarness) -> None:
        assert commit(h, "kept", offset=7) == [ErrorCode.none]
        partition = h.coord.partition_for("kept")
        other = next(f"elsewhere-{i}" for i in range(100)
                     if h.coord.partition_for(f"elsewhere-{i}") != partition)
        assert commit(h, other, offset=3) == [ErrorCode.none]
        h.coord.on_resigned(partition)
        assert commit_error(h, "kept", offset=8) == ErrorCode.not_coordinator
        assert "kept" not in h.coord.groups
        assert h.coord.state.offsets.get("kept", "t", 0) is None
        assert h.coord.state.offsets.get(other, "t", 0).offset == 3  # another partition's
        h.coord.on_elected(partition, 2)
        await h.until_loaded()
        assert h.coord.state.offsets.get("kept", "t", 0).offset == 7  # read back from the log
        assert commit(h, "kept", offset=9) == [ErrorCode.none]

    run(tmp_path, scenario)
