"""Partition reassignment decided by the controller (KIP-455): a move widens the replicas and
marks what it adds and removes, completes when an AlterPartition brings the last target into
the ISR (or at once when the ISR already holds them), elects a new leader when the leader was
removed, can be replaced or cancelled, and is listed while in progress; every refusal carries
its code and a message naming the problem."""

from __future__ import annotations

from typing import Any

import pytest

from spark_log.controller.alter_partition import alter_partition
from spark_log.controller.controller_apis import decision_for
from spark_log.controller.partition_reassignments import (
    alter_partition_reassignments,
    list_partition_reassignments,
)
from spark_log.metadata import MetadataImage, TopicPartition
from spark_log.metadata.records import PartitionChangeRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import (
    SETTINGS,
    apply,
    broker,
    image_of,
    records_of,
    request,
    topic,
    topic_config,
    topic_id,
)

# Brokers 1-4 active, 5 fenced; t has two partitions on 1,2,3 (led by 1), u one on 1,2.
IMAGE = image_of(broker(1), broker(2), broker(3), broker(4), broker(5, fenced=True),
                 topic("t", [[1, 2, 3], [1, 2, 3]]), topic("u", [[1, 2]]))
T = topic_id("t")

Moves = dict[tuple[str, int], Any]


def alter(image: MetadataImage, moves: Moves, version: int = 0, **fields: Any):  # type: ignore[no-untyped-def]
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, partition), replicas in moves.items():
        topics.setdefault(name, []).append({"partition_index": partition, "replicas": replicas})
    req = request(45, version, timeout=1000, **fields,
                  topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])
    return alter_partition_reassignments(image, req, settings=SETTINGS)


def errors(result: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(t.name, p.partition_index): (p.error_code, p.error_message)
            for t in result.response.responses for p in t.partitions}


def listed(image: MetadataImage, topics: dict[str, list[int]] | None = None
           ) -> dict[tuple[str, int], tuple[tuple[int, ...], ...]]:
    req = request(46, 0, timeout=1000, topics=None if topics is None else [
        {"name": n, "partition_indexes": ps} for n, ps in topics.items()])
    response = list_partition_reassignments(image, req).response
    assert response.error_code == ErrorCode.none
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics for p in t.partitions}


def isr_change(image: MetadataImage, isr: list[int], partition: int = 0) -> Any:
    """The leader of t-`partition` asks for `isr` (AlterPartition v3, current epochs)."""
    current = image.partition("t", partition)
    assert current is not None
    req = request(56, 3, broker_id=current.leader, broker_epoch=100 + current.leader, topics=[{
        "topic_id": T, "partitions": [{
            "partition_index": partition, "leader_epoch": current.leader_epoch,
            "leader_recovery_state": 0, "partition_epoch": current.partition_epoch,
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": 100 + b} for b in isr]}]}])
    return alter_partition(image, req)


def ok(result: Any) -> MetadataImage:
    assert all(code == ErrorCode.none for code, _ in errors(result).values()), errors(result)
    return apply(IMAGE, result)


# ---- submitting and completing ---------------------------------------------------------------

def test_a_move_widens_the_replicas_and_lists_until_the_new_replica_joins_the_isr() -> None:
    moving = ok(alter(IMAGE, {("t", 0): [1, 2, 4]}))
    part = moving.partition("t", 0)
    assert part is not None
    assert (part.replicas, part.adding_replicas, part.removing_replicas, part.isr,
            part.leader) == ((1, 2, 4, 3), (4,), (3,), (1, 2, 3), 1)
    assert listed(moving) == {("t", 0): ((1, 2, 4, 3), (4,), (3,))}
    joined = isr_change(moving, [1, 2, 3, 4])
    (answer,) = joined.response.topics[0].partitions
    assert answer.error_code == ErrorCode.none and answer.isr == (1, 2, 4)
    done = apply(moving, joined).partition("t", 0)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.is_reassigning) == \
        ((1, 2, 4), (1, 2, 4), 1, False)
    assert listed(apply(moving, joined)) == {}


def test_completion_elects_a_new_leader_when_the_leader_was_moved_away() -> None:
    moving = ok(alter(IMAGE, {("t", 0): [2, 3, 4]}))
    assert moving.partition("t", 0).leader == 1  # type: ignore[union-attr]
    joined = isr_change(moving, [1, 2, 3, 4])
    (answer,) = joined.response.topics[0].partitions
    assert answer.error_code == ErrorCode.new_leader_elected  # the asker no longer leads
    done = apply(moving, joined).partition("t", 0)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == \
        ((2, 3, 4), (2, 3, 4), 2, 1)


def test_a_new_replica_outside_the_isr_keeps_the_move_in_progress() -> None:
    moving = ok(alter(IMAGE, {("t", 0): [1, 2, 4]}))
    shrunk = apply(moving, isr_change(moving, [1, 2]))
    assert shrunk.partition("t", 0).is_reassigning  # type: ignore[union-attr]
    assert listed(shrunk) == {("t", 0): ((1, 2, 4, 3), (4,), (3,))}


def test_moves_the_isr_already_satisfies_complete_on_submission() -> None:
    result = alter(IMAGE, {("t", 0): [3, 2, 1], ("t", 1): [2, 3], ("u", 0): [1]})
    image = ok(result)
    reordered, shrunk, single = (image.partition("t", 0), image.partition("t", 1),
                                 image.partition("u", 0))
    assert reordered.replicas == (3, 2, 1) and reordered.leader == 1  # type: ignore
    # The leader (1) was removed: a new one is elected from the remaining ISR.
    assert (shrunk.replicas, shrunk.isr, shrunk.leader) == ((2, 3), (2, 3), 2)  # type: ignore
    assert (single.replicas, single.isr) == ((1,), (1,))  # type: ignore
    assert listed(image) == {}


def test_the_same_target_again_changes_nothing() -> None:
    result = alter(IMAGE, {("t", 0): [1, 2, 3]})
    assert errors(result) == {("t", 0): (ErrorCode.none, None)} and result.records == ()


def test_a_new_target_replaces_a_move_in_progress() -> None:
    moving = ok(alter(IMAGE, {("t", 0): [1, 2, 4]}))
    replaced = apply(moving, alter(moving, {("t", 0): [4, 2, 1]}))
    part = replaced.partition("t", 0)
    assert part is not None  # 4 is still being added; 3 still being removed
    assert (part.replicas, part.adding_replicas, part.removing_replicas) == \
        ((4, 2, 1, 3), (4,), (3,))
    back = apply(replaced, alter(replaced, {("t", 0): [1, 2, 3]}))
    part = back.partition("t", 0)  # every target in the ISR: done, 4 dropped
    assert part is not None
    assert (part.replicas, part.is_reassigning) == ((1, 2, 3), False)


# ---- cancelling ------------------------------------------------------------------------------

def test_cancelling_restores_the_original_replica_set() -> None:
    moving = ok(alter(IMAGE, {("t", 0): [2, 3, 4]}))
    cancelled = alter(moving, {("t", 0): None})
    assert errors(cancelled) == {("t", 0): (ErrorCode.none, None)}
    part = apply(moving, cancelled).partition("t", 0)
    assert part is not None
    # Kafka keeps the widened order of the original replicas (the added ones dropped).
    assert (part.replicas, part.isr, part.leader, part.is_reassigning) == \
        ((2, 3, 1), (1, 2, 3), 1, False)


def test_cancelling_without_a_move_in_progress_is_refused() -> None:
    result = alter(IMAGE, {("t", 0): None})
    assert errors(result) == {("t", 0): (ErrorCode.no_reassignment_in_progress, None)}
    assert result.records == ()


def test_a_cancel_needing_an_unclean_election_needs_the_topic_to_allow_it() -> None:
    # t-0 moving from 1,2,3 to 4 alone, and only 4 is in the ISR now.
    moving = ok(alter(IMAGE, {("t", 0): [4]}))
    moving = image_of(*_records_of(moving), PartitionChangeRecord(
        topic_id=T, partition_id=0, isr=(4,), leader=4))
    refused = alter(moving, {("t", 0): None})
    (code, message) = errors(refused)[("t", 0)]
    assert code == ErrorCode.invalid_replica_assignment and "unclean leader election" in message
    lossy = image_of(*_records_of(moving), topic_config("t", "unclean.leader.election.enable",
                                                        "true"))
    cancelled = alter(lossy, {("t", 0): None})
    assert cancelled.unclean_elections == (TopicPartition("t", 0),)
    part = apply(lossy, cancelled).partition("t", 0)
    assert part is not None and (part.replicas, part.isr, part.leader) == ((1, 2, 3), (1,), 1)


def _records_of(image: MetadataImage) -> list[Any]:
    return [r for r in image.to_records() if type(r).__name__ != "FeatureLevelRecord"]


# ---- refusals --------------------------------------------------------------------------------

@pytest.mark.parametrize(("move", "code", "message"), [
    (("nope", 0, [1, 2]), ErrorCode.unknown_topic_or_partition,
     "Unable to find a topic named nope."),
    (("t", 7, [1, 2]), ErrorCode.unknown_topic_or_partition, "Unable to find partition t:7."),
    (("t", 0, []), ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes an empty replica list."),
    (("t", 0, [1, 2, 2]), ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes the broker 2 more than once."),
    (("t", 0, [1, 9]), ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    (("t", 0, [1, 5]), ErrorCode.invalid_replica_assignment,
     "The manual partition assignment includes broker 5, which is fenced."),
])
def test_refusals(move: tuple[str, int, list[int]], code: ErrorCode, message: str) -> None:
    name, partition, replicas = move
    result = alter(IMAGE, {(name, partition): replicas, ("u", 0): [2, 1]})
    assert errors(result) == {(name, partition): (code, message), ("u", 0): (ErrorCode.none, None)}
    (record,) = result.records  # the other partition's move goes ahead
    assert record.replicas == (2, 1)


def test_v1_may_forbid_changing_the_replication_factor() -> None:
    forbidden = alter(IMAGE, {("t", 0): [1, 2], ("t", 1): [3, 2, 4]}, version=1,
                      allow_replication_factor_change=False)
    code, message = errors(forbidden)[("t", 0)]
    assert code == ErrorCode.invalid_replication_factor and "from 3 to 2" in message
    assert errors(forbidden)[("t", 1)] == (ErrorCode.none, None)
    allowed = alter(IMAGE, {("t", 0): [1, 2]}, version=1, allow_replication_factor_change=True)
    assert errors(allowed) == {("t", 0): (ErrorCode.none, None)}


def test_a_partition_named_twice_sees_its_first_change() -> None:
    req = request(45, 0, timeout=1000, topics=[
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2, 4]}]},
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": None}]}])
    result = alter_partition_reassignments(IMAGE, req, settings=SETTINGS)
    assert [p.error_code for t in result.response.responses for p in t.partitions] == [0, 0]
    part = apply(IMAGE, result).partition("t", 0)
    assert part is not None and (part.replicas, part.is_reassigning) == ((1, 2, 3), False)


# ---- listing ---------------------------------------------------------------------------------

def test_listing_all_or_the_partitions_asked() -> None:
    moving = ok(alter(IMAGE, {("t", 1): [1, 2, 4], ("u", 0): [3, 4]}))
    assert listed(moving) == {("t", 1): ((1, 2, 4, 3), (4,), (3,)),
                              ("u", 0): ((3, 4, 1, 2), (3, 4), (1, 2))}
    assert listed(moving, {"t": [0, 1, 9], "nope": [0]}) == {
        ("t", 1): ((1, 2, 4, 3), (4,), (3,))}
    assert listed(moving, {"t": [0]}) == {}


def test_the_controller_serves_both_apis() -> None:
    for api_key in (45, 46):
        assert decision_for(request(api_key, 0, timeout=1000, topics=[])) is not None
    assert records_of(alter(IMAGE, {("t", 0): [1, 2, 4]}), PartitionChangeRecord)
