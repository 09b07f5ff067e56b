"""Leader elections as Kafka's ReplicationControlManager makes them: ElectLeaders (preferred and
unclean, per partition results and errors), the periodic preferred-leader rebalance with the
imbalance percentage, and the periodic unclean election of leaderless partitions."""

from __future__ import annotations

import pytest

from spark_log.controller.controller_settings import ControllerSettings
from spark_log.controller.leader_election import (
    PREFERRED,
    UNCLEAN,
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
    imbalanced_partitions,
)
from spark_log.metadata import TopicPartition
from spark_log.protocol import ErrorCode

from .control_fixtures import (
    CLUSTER_ID,
    SETTINGS,
    apply,
    broker,
    image_of,
    request,
    topic,
    topic_config,
)

# p0 led by its preferred replica; p1 led by 2, preferred 1 available; p2 led by 2, preferred 3
# fenced; p3 without a leader, its ISR (3) fenced, 2 a live replica out of sync.
IMAGE = image_of(broker(1), broker(2), broker(3, fenced=True),
                 topic("t", [[1, 2], [1, 2], [3, 2], [3, 2]], isr=[[1, 2], [1, 2], [3, 2], [3]],
                       leaders=[1, 2, 2, -1]))


def elect(election_type: int, partitions: dict[str, list[int]] | None,  # type: ignore[no-untyped-def]
          image=IMAGE, version: int = 2):
    topics = None if partitions is None else [{"topic": name, "partitions": ids}
                                              for name, ids in partitions.items()]
    fields = {"topic_partitions": topics, "timeout": 1000}
    if version >= 1:
        fields["election_type"] = election_type
    return elect_leaders(image, request(43, version, **fields))


def outcome(result) -> dict[tuple[str, int], tuple[int, str | None]]:  # type: ignore[no-untyped-def]
    return {(t.topic, p.partition_id): (p.error_code, p.error_message)
            for t in result.response.replica_election_results for p in t.partition_result}


def test_preferred_elections_per_partition() -> None:
    result = elect(PREFERRED, {"t": [0, 1, 2, 3, 9], "nope": [0]})
    assert outcome(result) == {
        ("t", 0): (ErrorCode.election_not_needed,
                   "Leader election not needed for topic partition."),
        ("t", 1): (ErrorCode.none, None),
        ("t", 2): (ErrorCode.preferred_leader_not_available,
                   "The preferred leader was not available."),
        ("t", 3): (ErrorCode.preferred_leader_not_available,
                   "The preferred leader was not available."),
        ("t", 9): (ErrorCode.unknown_topic_or_partition, "No such partition as t-9"),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
    }
    assert result.response.error_code == ErrorCode.none
    assert apply(IMAGE, result).partition("t", 1).leader == 1
    assert not result.atomic


def test_unclean_elections_pick_a_live_replica_and_say_so() -> None:
    result = elect(UNCLEAN, {"t": [1, 3]})
    assert outcome(result) == {
        ("t", 1): (ErrorCode.election_not_needed,
                   "Leader election not needed for topic partition."),
        ("t", 3): (ErrorCode.none, None),
    }
    after = apply(IMAGE, result).partition("t", 3)
    assert (after.leader, after.isr) == (2, (2,))
    assert result.unclean_elections == (TopicPartition("t", 3),)


def test_an_unclean_election_needs_a_live_replica() -> None:
    image = image_of(broker(1, fenced=True), topic("t", [[1]], leaders=[-1]))
    assert outcome(elect(UNCLEAN, {"t": [0]}, image)) == {
        ("t", 0): (ErrorCode.eligible_leaders_not_available,
                   "Eligible topic partition leaders are not available.")}


def test_electing_every_partition_lists_only_those_that_needed_it() -> None:
    result = elect(PREFERRED, None)
    assert set(outcome(result)) == {("t", 1), ("t", 2), ("t", 3)}


def test_version_0_elects_preferred_leaders_and_an_empty_request_does_nothing() -> None:
    assert outcome(elect(PREFERRED, {"t": [1]}, version=0)) == {("t", 1): (ErrorCode.none, None)}
    empty = elect(PREFERRED, {})
    assert empty.records == () and empty.response.replica_election_results == ()


def test_an_unknown_election_type_fails_the_request() -> None:
    result = elect(7, {"t": [0, 1]})
    assert result.records == ()
    assert result.response.error_code == ErrorCode.invalid_request
    assert set(outcome(result).values()) == {(ErrorCode.invalid_request,
                                              "Unknown election type 7")}


# ---- periodic elections ---------------------------------------------------------------------

def test_the_rebalance_elects_preferred_leaders_of_imbalanced_brokers() -> None:
    settings = ControllerSettings(cluster_id=CLUSTER_ID, leader_imbalance_per_broker_percentage=0)
    result = balance_partition_leaders(IMAGE, settings=settings)
    assert result.response is False
    after = apply(IMAGE, result)
    assert after.partition("t", 1).leader == 1
    assert after.partition("t", 2).leader == 2  # its preferred replica is fenced


def test_the_imbalance_percentage_is_per_preferred_broker() -> None:
    # broker 1 is first replica of 10 partitions and leads 9: 10% imbalanced
    leaders = [1] * 9 + [2]
    image = image_of(broker(1), broker(2), topic("t", [[1, 2]] * 10, leaders=leaders))
    assert imbalanced_partitions(image, 10) == []
    assert imbalanced_partitions(image, 9) == [TopicPartition("t", 9)]
    assert balance_partition_leaders(image, settings=SETTINGS).records == ()
    off = ControllerSettings(cluster_id=CLUSTER_ID, auto_leader_rebalance_enable=False,
                             leader_imbalance_per_broker_percentage=0)
    assert balance_partition_leaders(image, settings=off).records == ()


def test_the_rebalance_stops_at_the_election_limit() -> None:
    image = image_of(broker(1), broker(2), topic("t", [[1, 2]] * 5, leaders=[2] * 5))
    settings = ControllerSettings(cluster_id=CLUSTER_ID, max_elections_per_imbalance=3,
                                  leader_imbalance_per_broker_percentage=0)
    result = balance_partition_leaders(image, settings=settings)
    assert len(result.records) == 3 and result.response is True
    rest = balance_partition_leaders(apply(image, result), settings=settings)
    assert len(rest.records) == 2 and rest.response is False


@pytest.mark.parametrize("enabled", [False, True])
def test_leaderless_partitions_are_elected_uncleanly_where_the_topic_allows(
        enabled: bool) -> None:
    configs = [topic_config("t", "unclean.leader.election.enable", "true")] if enabled else []
    image = image_of(IMAGE.to_records(), *configs, metadata_version=None)
    result = elect_unclean_leaders(image, settings=SETTINGS)
    if enabled:
        assert result.unclean_elections == (TopicPartition("t", 3),)
        assert apply(image, result).partition("t", 3).leader == 2
    else:
        assert result.records == () and result.unclean_elections == ()


def test_the_static_default_enables_unclean_elections_for_every_topic() -> None:
    settings = ControllerSettings(cluster_id=CLUSTER_ID,
                                  topic_defaults={"unclean.leader.election.enable": "true"})
    assert elect_unclean_leaders(IMAGE, settings=settings).unclean_elections == (
        TopicPartition("t", 3),)
    image = image_of(IMAGE.to_records(), topic_config("t", "unclean.leader.election.enable",
                                                      "false"), metadata_version=None)
    assert elect_unclean_leaders(image, settings=settings).records == ()
